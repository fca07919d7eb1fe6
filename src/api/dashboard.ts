/**
 * The app host's pages outside /api/v1: the live model translation table (GET /api/model-map) and a
 * small read-only dashboard at `/` that reads the management API with a management key the user
 * pastes (kept in the tab's sessionStorage, never sent anywhere but this origin).
 */
import { Elysia } from 'elysia'
import type { AppDeps } from './deps'
import { catalogStaleAfterMs } from '../gateways/model-catalog'
import { pricingOfStoredObject } from '../gateways/model-prices'

export function modelMap(deps: AppDeps) {
  const now = Date.now()
  const models = new Map<string, { id: string; canonical_id: string; pricing?: { prompt: number | null; completion: number | null } }[]>()
  for (const row of deps.repositories.gatewayCatalogs.listModels()) {
    const list = models.get(row.gateway) ?? []
    // Prices where the gateway lists them (USD per token); a side it does not list is null (unknown, never zero).
    const pricing = pricingOfStoredObject(row.object)
    list.push({ id: row.modelId, canonical_id: row.canonicalId, ...(pricing ? { pricing: { prompt: pricing.prompt ?? null, completion: pricing.completion ?? null } } : {}) })
    models.set(row.gateway, list)
  }
  return deps.repositories.gatewayCatalogs.listCatalogs().map((catalog) => ({
    gateway: catalog.gateway,
    fetched_at: new Date(catalog.fetchedAt).toISOString(),
    stale: now - catalog.fetchedAt > catalogStaleAfterMs,
    models: (models.get(catalog.gateway) ?? []).sort((left, right) => left.canonical_id.localeCompare(right.canonical_id)),
  }))
}

const page = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>Router dashboard</title>
<style>
body{font:14px/1.45 system-ui,sans-serif;margin:2rem auto;max-width:72rem;padding:0 1rem;color:#1d1d1f}
h1{font-size:1.4rem}h2{font-size:1.1rem;margin-top:2rem}table{border-collapse:collapse;width:100%}
th,td{text-align:left;padding:.3rem .5rem;border-bottom:1px solid #ddd;vertical-align:top}th{background:#f5f5f7}
code{font:12px ui-monospace,monospace}.muted{color:#6e6e73}#error{color:#b00020}input{width:28rem;padding:.3rem}
</style></head><body>
<h1>Router dashboard</h1>
<p><label>Management key <input id="key" type="password" placeholder="rt_mgmt_…" autocomplete="off"></label>
<button id="load">Load</button> <span id="error"></span></p>
<div id="out" class="muted">Paste a management key to see this workspace. Changes are made with the API, the MCP endpoint or the operator CLI.</div>
<script>
const $ = (id) => document.getElementById(id)
const esc = (value) => String(value ?? '').replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c])
const table = (rows, columns) => rows.length ? '<table><tr>' + columns.map((c) => '<th>' + esc(c[0]) + '</th>').join('') + '</tr>' +
  rows.map((row) => '<tr>' + columns.map((c) => '<td>' + c[1](row) + '</td>').join('') + '</tr>').join('') + '</table>' : '<p class="muted">none</p>'
async function api(path) {
  const response = await fetch('/api/v1' + path, { headers: { authorization: 'Bearer ' + $('key').value.trim() } })
  const body = await response.json()
  if (!response.ok) throw new Error(body.error || response.statusText)
  return body.data
}
async function load() {
  $('error').textContent = ''
  sessionStorage.setItem('router-key', $('key').value.trim())
  try {
    const [account, keys, summary, byGateway] = await Promise.all([api('/account'), api('/keys'), api('/usage/summary?range=24h'), api('/usage/breakdown?by=gateway&range=24h')])
    $('out').className = ''
    $('out').innerHTML =
      '<h2>Workspace ' + esc(account.workspace.name) + '</h2><p class="muted">' + esc(account.workspace.id) + ' · ' +
      account.inference_keys.live + ' live keys, ' + account.inference_keys.revoked + ' revoked · ' + account.members.total + ' members</p>' +
      '<h2>Last 24 hours</h2><p>' + summary.requests + ' requests · ' + summary.errors + ' errors (' + summary.errorRate + '%) · average latency ' +
      summary.avgLatency + ' ms · average router overhead ' + summary.avgOverhead + ' ms</p>' +
      table(byGateway, [['gateway', (r) => esc(r.name)], ['requests', (r) => r.requests]]) +
      '<h2>Inference keys</h2>' + table(keys, [['label', (k) => esc(k.label)], ['prefix', (k) => '<code>' + esc(k.key_prefix) + '…</code>'], ['shape', (k) => esc(k.api_shape)],
        ['routing', (k) => esc(k.routing.strategy) + ': ' + k.routing.targets.map((t) => esc(t.gateway)).join(', ')], ['last used', (k) => esc(k.last_used_at ?? '–')], ['revoked', (k) => esc(k.revoked_at ?? '')]]) +
      '<h2>Provider keys</h2>' + table(account.provider_keys, [['label', (p) => esc(p.label)], ['gateway', (p) => esc(p.gateway)], ['key', (p) => '<code>…' + esc(p.key_last4) + '</code>'], ['disabled', (p) => esc(p.disabled_at ?? '')]])
  } catch (error) {
    $('error').textContent = error.message
  }
}
$('load').onclick = load
$('key').value = sessionStorage.getItem('router-key') || ''
if ($('key').value) load()
</script></body></html>`

export function dashboardRoutes(deps: AppDeps) {
  return new Elysia({ name: 'dashboard' })
    .get('/', () => new Response(page, { headers: { 'content-type': 'text/html; charset=utf-8' } }), { detail: { hide: true } })
    .get('/api/model-map', () => ({ data: modelMap(deps) }), { detail: { hide: true } })
}
