/**
 * Scheduled jobs run under a lease row (job_leases): the repository's atomic take, the runner shared
 * by the scheduler and the CLI, `jobs run` refusing while another process holds the lease
 * (CONTRACT §5), and the scheduler's worker thread running a due job in a server process.
 */
import { describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { loadConfig } from '../../src/config/env'
import { createLogger, silentLogger } from '../../src/observability/logger'
import { createRuntime, type Runtime } from '../../src/runtime'
import { runUnderLease } from '../../src/scheduler/lease'
import { startScheduler } from '../../src/scheduler/scheduler'
import { baseEnvironment, repoRoot, startService, tempDir } from '../harness/service-process'
import { testMasterKey } from '../harness/server'

const hour = 3_600_000
const holderPattern = /^[^:\s]+:\d+:[0-9a-z]{6}$/

/** A runtime on a real SQLite file in a temp dir; a second one on the same dir is a second connection. */
function openRuntime(dataDir: string, environment: Record<string, string> = {}): Runtime & Disposable {
  const runtime = createRuntime(loadConfig({ RT_DATA_DIR: dataDir, RT_MASTER_KEY: testMasterKey, RT_LOG_LEVEL: 'warn', ...environment }), { logger: silentLogger })
  return Object.assign(runtime, { [Symbol.dispose]: () => runtime.storage.close() })
}

function temporaryDirectory(): { path: string } & Disposable {
  const path = mkdtempSync(join(tmpdir(), 'router-leases-'))
  return { path, [Symbol.dispose]: () => rmSync(path, { recursive: true, force: true }) }
}

/** Log lines captured as parsed objects. */
function capturingLogger() {
  const entries: Record<string, any>[] = []
  return { entries, logger: createLogger('debug', (line) => void entries.push(JSON.parse(line))) }
}

/** Polls a condition the code under test makes true on its own thread; fails after `limitMs`. */
async function eventually(condition: () => boolean, limitMs = 5000) {
  const deadline = Date.now() + limitMs
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not met in time')
    await Bun.sleep(10)
  }
}

async function cli(dataDir: string, args: string[]) {
  const child = Bun.spawn(['bun', 'run', 'src/cli/index.ts', ...args], {
    cwd: repoRoot,
    env: { ...baseEnvironment(), RT_DATA_DIR: dataDir, RT_MASTER_KEY: testMasterKey },
    stdout: 'pipe',
    stderr: 'pipe',
  })
  const [stdout, stderr, exitCode] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited])
  const lines = (text: string) => text.split('\n').filter((line) => line !== '')
  return { exitCode, stdout: lines(stdout), stderr: lines(stderr) }
}

describe('job lease repository', () => {
  test('of two holders on two connections exactly one takes the lease; an expired lease can be taken', () => {
    using directory = temporaryDirectory()
    using first = openRuntime(directory.path)
    using second = openRuntime(directory.path)
    const now = 1_000_000
    const taken = [
      first.repositories.jobLeases.acquire('budget-learn', 'host-a:1:aaaaaa', now, 60_000, { dueOnly: false }),
      second.repositories.jobLeases.acquire('budget-learn', 'host-b:2:bbbbbb', now, 60_000, { dueOnly: false }),
    ]
    expect(taken).toEqual([true, false])
    expect(second.repositories.jobLeases.get('budget-learn')).toMatchObject({ holder: 'host-a:1:aaaaaa', lockedUntil: now + 60_000 })
    // The same holder may take it again (it extends its own lease); the other may not until it expires.
    expect(first.repositories.jobLeases.acquire('budget-learn', 'host-a:1:aaaaaa', now + 1000, 60_000, { dueOnly: false })).toBe(true)
    expect(second.repositories.jobLeases.acquire('budget-learn', 'host-b:2:bbbbbb', now + 60_000, 60_000, { dueOnly: false })).toBe(false)
    expect(second.repositories.jobLeases.acquire('budget-learn', 'host-b:2:bbbbbb', now + 61_000, 60_000, { dueOnly: false })).toBe(true)
    // The first holder lost it: it can neither renew nor release it.
    expect(first.repositories.jobLeases.renew('budget-learn', 'host-a:1:aaaaaa', now + 200_000)).toBe(false)
    expect(first.repositories.jobLeases.release('budget-learn', 'host-a:1:aaaaaa', { nextRunAt: 0, result: {}, finishedAt: now })).toBe(false)
    expect(second.repositories.jobLeases.renew('budget-learn', 'host-b:2:bbbbbb', now + 200_000)).toBe(true)
    expect(second.repositories.jobLeases.release('budget-learn', 'host-b:2:bbbbbb', { nextRunAt: now + hour, result: { budgets: {} }, finishedAt: now + 62_000 })).toBe(true)
    expect(first.repositories.jobLeases.get('budget-learn')).toEqual({
      job: 'budget-learn',
      holder: 'host-b:2:bbbbbb',
      lockedUntil: 0,
      nextRunAt: now + hour,
      lastFinishedAt: now + 62_000,
      lastResult: '{"budgets":{}}',
    })
  })

  test('dueOnly takes a lease only once next_run_at has come; rows are created on first sight', () => {
    using directory = temporaryDirectory()
    using runtime = openRuntime(directory.path)
    const leases = runtime.repositories.jobLeases
    const now = 5_000_000
    // No row yet: the scheduler's take creates it, first due a minute later, and does not run it.
    expect(leases.acquire('catalog-crawl', 'host-a:1:aaaaaa', now, 60_000, { dueOnly: true, firstRunAt: now + 60_000 })).toBe(false)
    expect(leases.get('catalog-crawl')).toMatchObject({ holder: null, lockedUntil: 0, nextRunAt: now + 60_000, lastFinishedAt: null })
    expect(leases.acquire('catalog-crawl', 'host-a:1:aaaaaa', now + 59_999, 60_000, { dueOnly: true })).toBe(false)
    // The CLI's take ignores the schedule.
    expect(leases.acquire('catalog-crawl', 'host-b:2:bbbbbb', now, 60_000, { dueOnly: false })).toBe(true)
    leases.release('catalog-crawl', 'host-b:2:bbbbbb', { nextRunAt: now + hour, result: {}, finishedAt: now })
    expect(leases.acquire('catalog-crawl', 'host-a:1:aaaaaa', now + hour - 1, 60_000, { dueOnly: true })).toBe(false)
    expect(leases.acquire('catalog-crawl', 'host-a:1:aaaaaa', now + hour, 60_000, { dueOnly: true })).toBe(true)
    // A stopping process frees what it holds and leaves the job due.
    expect(leases.abandon('host-a:1:aaaaaa')).toBe(1)
    expect(leases.get('catalog-crawl')).toMatchObject({ lockedUntil: 0, nextRunAt: now + hour })
    expect(leases.list().map((row) => row.job)).toEqual(['catalog-crawl'])
  })
})

describe('runUnderLease', () => {
  test('logs start, throttled progress with the last report, and the result; holds and renews the lease while running', async () => {
    using directory = temporaryDirectory()
    using runtime = openRuntime(directory.path)
    using other = openRuntime(directory.path)
    const { entries, logger } = capturingLogger()
    let heldByOther: boolean | undefined
    const outcome = await runUnderLease(runtime, 'budget-learn', {
      holder: 'host-a:1:aaaaaa',
      dueOnly: false,
      everyMs: hour,
      firstAfterMs: 0,
      leaseMs: 60_000,
      renewEveryMs: 5,
      logger,
      job: async (_runtime, progress) => {
        for (let done = 1; done <= 500; done++) progress(done, 500)
        heldByOther = other.repositories.jobLeases.acquire('budget-learn', 'host-b:2:bbbbbb', Date.now(), 60_000, { dueOnly: false })
        const taken = other.repositories.jobLeases.get('budget-learn')!.lockedUntil
        // Renewed while running: the lease moves forward without the job doing anything.
        await eventually(() => other.repositories.jobLeases.get('budget-learn')!.lockedUntil > taken)
        return { budgets: {} }
      },
    })
    expect(heldByOther).toBe(false)
    expect(outcome).toMatchObject({ status: 'finished', result: { budgets: {} } })
    expect(entries.map((entry) => [entry.event, entry.done])).toEqual([
      ['job_started', undefined],
      ['job_progress', 1],
      ['job_progress', 500],
      ['job_finished', undefined],
    ])
    expect(entries[0]).toMatchObject({ level: 'info', job: 'budget-learn', holder: 'host-a:1:aaaaaa' })
    expect(entries[2]).toMatchObject({ job: 'budget-learn', done: 500, total: 500 })
    expect(entries[3]).toMatchObject({ job: 'budget-learn', result: { budgets: {} }, duration_ms: expect.any(Number) })
    const row = runtime.repositories.jobLeases.get('budget-learn')!
    expect(row.lockedUntil).toBe(0)
    expect(row.nextRunAt - row.lastFinishedAt!).toBe(hour)
  })

  test('a failing job is logged and recorded, and its lease freed; a held lease is not run', async () => {
    using directory = temporaryDirectory()
    using runtime = openRuntime(directory.path)
    const { entries, logger } = capturingLogger()
    const options = { holder: 'host-a:1:aaaaaa', dueOnly: false, everyMs: hour, firstAfterMs: 0, logger }
    const failed = await runUnderLease(runtime, 'catalog-crawl', { ...options, job: async () => Promise.reject(new Error('catalog down')) })
    expect(failed).toMatchObject({ status: 'failed', message: 'catalog down' })
    expect(entries.map((entry) => entry.event)).toEqual(['job_started', 'job_failed'])
    expect(entries[1]).toMatchObject({ level: 'error', job: 'catalog-crawl', error: 'catalog down' })
    expect(runtime.repositories.jobLeases.get('catalog-crawl')).toMatchObject({ lockedUntil: 0, lastResult: '{"error":"catalog down"}' })

    runtime.repositories.jobLeases.acquire('catalog-crawl', 'host-b:2:bbbbbb', Date.now(), 60_000, { dueOnly: false })
    let ran = false
    const skipped = await runUnderLease(runtime, 'catalog-crawl', { ...options, job: async () => ((ran = true), {}) })
    expect(ran).toBe(false)
    expect(skipped).toMatchObject({ status: 'skipped', holder: 'host-b:2:bbbbbb' })
    expect(entries).toHaveLength(2)
  })
})

describe('jobs run under the lease (CLI)', () => {
  test('refuses while another process holds the lease, runs once it is free and moves the next scheduled run', async () => {
    using directory = temporaryDirectory()
    using runtime = openRuntime(directory.path)
    const leases = runtime.repositories.jobLeases
    const lockedUntil = Date.now() + 60_000
    expect(leases.acquire('budget-learn', 'other-host:4242:abcdef', Date.now(), 60_000, { dueOnly: false })).toBe(true)

    const refused = await cli(directory.path, ['jobs', 'run', 'budget-learn'])
    expect(refused.exitCode).toBe(1)
    expect(refused.stdout).toEqual([])
    expect(refused.stderr).toHaveLength(1)
    const { error } = JSON.parse(refused.stderr[0]!)
    const match = /^job 'budget-learn' is running in another process \(other-host:4242:abcdef\) until (\S+); try again later$/.exec(error)
    expect(match).not.toBeNull()
    expect(Math.abs(Date.parse(match![1]!) - lockedUntil)).toBeLessThan(2000)
    expect(leases.get('budget-learn')!.lastFinishedAt).toBeNull()

    leases.release('budget-learn', 'other-host:4242:abcdef', { nextRunAt: 0, result: {}, finishedAt: 0 })
    const before = Date.now()
    const ran = await cli(directory.path, ['jobs', 'run', 'budget-learn'])
    const after = Date.now()
    expect(ran.exitCode).toBe(0)
    // stdout stays the one result object; the job's log lines go to stderr.
    expect(ran.stdout).toEqual(['{"job":"budget-learn","budgets":{}}'])
    const logged = ran.stderr.map((line) => JSON.parse(line))
    expect(logged.map((entry) => entry.event)).toEqual(['job_started', 'job_finished'])
    expect(logged[0].holder).toMatch(holderPattern)
    const row = leases.get('budget-learn')!
    expect(row).toMatchObject({ holder: logged[0].holder, lockedUntil: 0, lastResult: '{"budgets":{}}' })
    // The scheduler does not rerun it right after: next due one interval (4 hours) on.
    expect(row.nextRunAt).toBeGreaterThanOrEqual(before + 4 * hour)
    expect(row.nextRunAt).toBeLessThanOrEqual(after + 4 * hour)
  })
})

describe('scheduler worker', () => {
  test('runs a due job on its own thread, creates the other rows without running them, and stops with its leases freed', async () => {
    using directory = temporaryDirectory()
    using runtime = openRuntime(directory.path)
    const leases = runtime.repositories.jobLeases
    leases.setNextRunAt('budget-learn', Date.now() - 1000)
    const stop = startScheduler(runtime, { tickMs: 20 })
    try {
      await eventually(() => leases.get('budget-learn')?.lastFinishedAt != null)
    } finally {
      await stop()
    }
    const rows = leases.list()
    expect(rows.map((row) => row.job)).toEqual(['batch-refresh', 'budget-learn', 'cache-prune', 'catalog-crawl', 'log-prune', 'webhooks'])
    for (const row of rows) expect(row.lockedUntil).toBe(0)
    expect(rows.filter((row) => row.lastFinishedAt !== null).map((row) => row.job)).toEqual(['budget-learn'])
    const learned = rows.find((row) => row.job === 'budget-learn')!
    expect(learned.holder).toMatch(holderPattern)
    expect(learned.lastResult).toBe('{"budgets":{}}')
    expect(learned.nextRunAt - learned.lastFinishedAt!).toBe(4 * hour)
    // A new row's first run lies ahead (a minute for the crawl, five for the others).
    expect(rows.find((row) => row.job === 'catalog-crawl')!.nextRunAt).toBeGreaterThan(Date.now() + 30_000)
  })

  test('in the server process: the due job logs job_started and job_finished on stdout, and SIGTERM stops cleanly', async () => {
    const dataDir = tempDir()
    {
      using runtime = openRuntime(dataDir)
      runtime.repositories.jobLeases.setNextRunAt('budget-learn', Date.now() - 1000)
    }
    const service = startService(dataDir, { RT_MASTER_KEY: testMasterKey })
    await service.listening()
    const started = JSON.parse(await service.waitForLine((line) => line.includes('"job_started"')))
    const finished = JSON.parse(await service.waitForLine((line) => line.includes('"job_finished"')))
    expect(started).toMatchObject({ level: 'info', event: 'job_started', job: 'budget-learn', holder: expect.stringMatching(holderPattern) })
    expect(finished).toMatchObject({ level: 'info', event: 'job_finished', job: 'budget-learn', result: { budgets: {} }, duration_ms: expect.any(Number) })
    expect(await service.stop()).toBe(0)
    using runtime = openRuntime(dataDir)
    expect(runtime.repositories.jobLeases.get('budget-learn')).toMatchObject({ holder: started.holder, lockedUntil: 0, lastResult: '{"budgets":{}}' })
  })
})
