/**
 * The dashboard (issue: admin, usage charts, request explorer). Sign in with a management key; the
 * pages read and write through the management API and the dashboard's own routes, so every rule
 * is the server's. A read-only key sees no write control. Pages are chosen by the URL's hash.
 */
import { render } from 'preact'
import { useEffect, useState } from 'preact/hooks'
import { api, ApiError, storedKey, storeKey, type Session } from './api'
import { messageOf } from './ui'
import { OverviewPage } from './pages/overview'
import { KeysPage } from './pages/keys'
import { ProvidersPage } from './pages/providers'
import { RequestsPage } from './pages/requests'
import { WorkspacePage } from './pages/workspace'
import { AuditPage } from './pages/audit'

const pages = [
  { hash: '#/overview', title: 'Usage', page: OverviewPage },
  { hash: '#/keys', title: 'Inference keys', page: KeysPage },
  { hash: '#/providers', title: 'Provider keys', page: ProvidersPage },
  { hash: '#/requests', title: 'Requests', page: RequestsPage },
  { hash: '#/workspace', title: 'Workspace', page: WorkspacePage },
  { hash: '#/audit', title: 'Audit log', page: AuditPage },
] as const

function useHash(): string {
  const [hash, setHash] = useState(location.hash || pages[0].hash)
  useEffect(() => {
    const changed = () => setHash(location.hash || pages[0].hash)
    addEventListener('hashchange', changed)
    return () => removeEventListener('hashchange', changed)
  }, [])
  return hash
}

function SignIn({ onSession, error: initialError }: { onSession: (session: Session) => void; error?: string }) {
  const [key, setKey] = useState('')
  const [error, setError] = useState(initialError)
  const [busy, setBusy] = useState(false)
  const submit = async (event: Event) => {
    event.preventDefault()
    setBusy(true)
    storeKey(key.trim())
    try {
      onSession(await api<Session>('/dashboard/api/session'))
    } catch (failure) {
      storeKey(null)
      setError(messageOf(failure))
    } finally {
      setBusy(false)
    }
  }
  return (
    <main class="signin">
      <h1>Router dashboard</h1>
      <p class="muted">Sign in with a management key of your workspace. It is kept in this tab only.</p>
      <form onSubmit={submit}>
        <label>
          Management key
          <input type="password" name="key" autocomplete="off" placeholder="rt_mgmt_…" value={key} onInput={(event) => setKey(event.currentTarget.value)} required autoFocus />
        </label>
        <p>
          <button class="primary" type="submit" disabled={busy}>
            Sign in
          </button>
        </p>
        {error ? (
          <p class="error" role="alert">
            {error}
          </p>
        ) : null}
      </form>
    </main>
  )
}

function App() {
  const [session, setSession] = useState<Session>()
  const [checking, setChecking] = useState(storedKey() !== null)
  const [error, setError] = useState<string>()
  const hash = useHash()
  // A key kept from earlier in this tab: signed in again without asking.
  useEffect(() => {
    if (!storedKey()) return
    api<Session>('/dashboard/api/session').then(
      (found) => (setSession(found), setChecking(false)),
      // Only a refused key is forgotten: a network error or a 5xx keeps it for the next try.
      (failure) => (failure instanceof ApiError && failure.status === 401 && storeKey(null), setError(messageOf(failure)), setChecking(false)),
    )
  }, [])
  if (checking) return <p class="muted signin">Signing in…</p>
  if (!session) return <SignIn onSession={setSession} error={error} />
  const current = pages.find((page) => hash.startsWith(page.hash)) ?? pages[0]
  const Page = current.page
  const signOut = () => {
    storeKey(null)
    setSession(undefined)
  }
  return (
    <>
      <header>
        <h1>Router</h1>
        <nav aria-label="Pages">
          {pages.map((page) => (
            <a href={page.hash} aria-current={page === current ? 'page' : undefined}>
              {page.title}
            </a>
          ))}
        </nav>
        <div class="who">
          <span>
            {session.workspace.name} {session.read_only ? <span class="badge">read-only</span> : null}
          </span>
          <button type="button" onClick={signOut}>
            Sign out
          </button>
        </div>
      </header>
      <main>
        <Page session={session} path={hash} refreshSession={() => api<Session>('/dashboard/api/session').then(setSession, () => {})} />
      </main>
    </>
  )
}

render(<App />, document.getElementById('app')!)
