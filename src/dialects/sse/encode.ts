/** SSE encoding helpers. */
const encoder = new TextEncoder()

export function sseData(value: unknown): Uint8Array {
  return encoder.encode(`data: ${typeof value === 'string' ? value : JSON.stringify(value)}\n\n`)
}

export function sseEvent(event: string, value: unknown): Uint8Array {
  return encoder.encode(`event: ${event}\ndata: ${JSON.stringify(value)}\n\n`)
}
