/**
 * A strict structural check of our Response objects and stream events against real ones recorded
 * from the vendor (../shared/fixtures/upstream/openai-responses): every field the real object has
 * is present in ours with the same JSON type, recursively — what a client validating the real shape
 * checks. Values may differ; vendor-only fields are named and skipped.
 */

/** Fields the real API sends that describe the vendor's account or hidden state, not the shape. */
const vendorOnly = new Set([
  'billing', // the vendor's billing party
  'obfuscation', // padding against length side channels
  'encrypted_content', // encrypted reasoning, dropped by translation (SPEC "POST /responses")
])

/**
 * Fields the Open Responses schema declares nullable: ours may be null where the recorded one had a
 * value (and the reverse is always fine, as long as the field is there).
 */
const nullable = new Set([
  'instructions',
  'previous_response_id',
  'max_output_tokens',
  'max_tool_calls',
  'user',
  'safety_identifier',
  'prompt_cache_key',
  'prompt_cache_retention',
  'incomplete_details',
  'error',
  'completed_at',
  'effort',
  'summary',
  'usage',
  'description',
  'parameters',
  'strict',
])

/** Values whose inside is the client's own (a tool's JSON schema, metadata): only their kind is checked. */
const opaque = new Set(['parameters', 'metadata', 'schema'])

const kind = (value: unknown) => (value === null ? 'null' : Array.isArray(value) ? 'array' : typeof value)

/** Where ours differs in shape from the recorded `real`; empty when it validates. */
export function shapeMismatches(ours: unknown, real: unknown, path = '$'): string[] {
  const name = path.slice(path.lastIndexOf('.') + 1)
  if (real === null) return []
  if (ours === null) return nullable.has(name) ? [] : [`${path}: null where the real API sends ${kind(real)}`]
  if (kind(ours) !== kind(real)) return [`${path}: ${kind(ours)} where the real API sends ${kind(real)}`]
  if (opaque.has(name)) return []
  if (Array.isArray(real)) {
    const items = ours as unknown[]
    const problems: string[] = []
    for (const [index, realItem] of real.entries()) {
      const type = typeof realItem === 'object' && realItem !== null ? (realItem as { type?: unknown }).type : undefined
      const match = type === undefined ? items[index] : items.find((item) => typeof item === 'object' && item !== null && (item as { type?: unknown }).type === type)
      // Which items a reply has is its content, not its shape: an item type ours lacks is not compared.
      if (match === undefined) continue
      problems.push(...shapeMismatches(match, realItem, `${path}[${index}]`))
    }
    return problems
  }
  if (typeof real === 'object') {
    const problems: string[] = []
    const mine = ours as Record<string, unknown>
    for (const [key, value] of Object.entries(real as Record<string, unknown>)) {
      if (vendorOnly.has(key)) continue
      if (!(key in mine)) problems.push(`${path}.${key}: missing`)
      else problems.push(...shapeMismatches(mine[key], value, `${path}.${key}`))
    }
    return problems
  }
  return []
}

/** A stream event's kind for comparison: its type, and the type of the item it carries. */
export function eventKind(event: { type?: unknown; item?: { type?: unknown } }): string {
  return event.item?.type ? `${String(event.type)}(${String(event.item.type)})` : String(event.type)
}
