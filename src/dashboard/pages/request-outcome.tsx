/**
 * The request explorer's view of what the response cache, mid-stream continuation and guardrails did
 * to a request (CONTRACT §15, §16, §17): badges for the table, lines for a row's detail.
 */
import type { RequestRow } from '../api'
import { usd } from './format-usd'

/** A guardrail finding as the row records it: which rule, on which side, what it did, how often (never the matched text). */
export interface GuardrailFinding {
  rule: string
  where: 'input' | 'output'
  action: string
  count: number
}

/** A row of `/dashboard/api/requests` with the fields the cache, continuation and guardrails add. */
export type ExplorerRow = RequestRow & {
  cache: 'hit' | 'semantic-hit' | 'coalesced' | null
  saved_usd: number | null
  continued: number | null
  guardrails: GuardrailFinding[] | null
}

const cacheLabels: Record<NonNullable<ExplorerRow['cache']>, string> = { hit: 'cache hit', 'semantic-hit': 'semantic hit', coalesced: 'coalesced' }

/**
 * Findings summed per action, e.g. "mask ×2, block ×1": the rule's action as recorded, not "masked",
 * since a key in monitor mode records its findings and changes nothing.
 */
function findingsText(findings: readonly GuardrailFinding[]): string {
  const byAction = new Map<string, number>()
  for (const finding of findings) byAction.set(finding.action, (byAction.get(finding.action) ?? 0) + finding.count)
  return [...byAction].map(([action, count]) => `${action} ×${count}`).join(', ')
}

/** The cache badge in the accent colour (the stylesheet has good and bad; a cache answer is neither). */
const cacheStyle = 'color:var(--accent);border-color:var(--accent)'

/** The table's badges: the cache outcome, continuations and guardrail findings, each only where present. */
export function OutcomeBadges({ row }: { row: ExplorerRow }) {
  const findings = row.guardrails ?? []
  if (!row.cache && !row.continued && findings.length === 0) return null
  return (
    <span style="display:inline-flex;gap:.25rem;flex-wrap:wrap">
      {row.cache ? (
        <span class="badge" style={cacheStyle} data-testid="cache-badge" title={row.saved_usd !== null ? `saved ${usd(row.saved_usd)}` : undefined}>
          {cacheLabels[row.cache] ?? row.cache}
        </span>
      ) : null}
      {row.continued ? <span class="badge">continued ×{row.continued}</span> : null}
      {findings.length ? <span class={findings.some((finding) => finding.action === 'block') ? 'badge bad' : 'badge'}>guardrails: {findingsText(findings)}</span> : null}
    </span>
  )
}

/** The detail's lines for the same (definition-list items), each only where present. */
export function OutcomeDetail({ row }: { row: ExplorerRow }) {
  const findings = row.guardrails ?? []
  return (
    <>
      {row.cache ? (
        <>
          <dt>cache</dt>
          <dd>
            {cacheLabels[row.cache] ?? row.cache}
            {row.saved_usd !== null ? `, saved ${usd(row.saved_usd)}` : ', saving unknown (the original was unpriced)'}
          </dd>
        </>
      ) : null}
      {row.continued ? (
        <>
          <dt>continued</dt>
          <dd>
            {row.continued} time{row.continued === 1 ? '' : 's'} after the stream broke
          </dd>
        </>
      ) : null}
      {findings.length ? (
        <>
          <dt>guardrails</dt>
          <dd>
            {findings.map((finding) => (
              <div>
                {finding.rule} in the {finding.where}: {finding.action} ×{finding.count}
              </div>
            ))}
          </dd>
        </>
      ) : null}
    </>
  )
}
