/** SSE encoding helpers. */
const encoder = new TextEncoder()

export function sseData(value: unknown): Uint8Array {
  return encoder.encode(`data: ${typeof value === 'string' ? value : JSON.stringify(value)}\n\n`)
}

export function sseEvent(event: string, value: unknown): Uint8Array {
  return encoder.encode(`event: ${event}\ndata: ${JSON.stringify(value)}\n\n`)
}

/** An SSE comment line, which every client ignores (a continued stream's seam). */
export function sseComment(text: string): Uint8Array {
  return encoder.encode(`: ${text}\n\n`)
}
