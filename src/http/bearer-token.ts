/** The bearer token of an `Authorization` header, for inference keys, management keys and the cluster's internal calls alike. */

const isSpace = (code: number) => code === 32 || (code >= 9 && code <= 13) || code === 160

/**
 * The token of `Authorization: Bearer <token>`: the scheme in any case, one token, blanks around it
 * allowed. Scanned without a regular expression (it runs on every inference request).
 */
export function bearerToken(header: string | null | undefined): string | undefined {
  if (!header) return undefined
  const scheme = 'bearer'
  for (let index = 0; index < scheme.length; index++) {
    if ((header.charCodeAt(index) | 0x20) !== scheme.charCodeAt(index)) return undefined
  }
  let index = scheme.length
  if (!isSpace(header.charCodeAt(index))) return undefined
  while (isSpace(header.charCodeAt(index))) index++
  const start = index
  while (index < header.length && !isSpace(header.charCodeAt(index))) index++
  const end = index
  while (isSpace(header.charCodeAt(index))) index++
  return end > start && index === header.length ? header.slice(start, end) : undefined
}
