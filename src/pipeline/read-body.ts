/** Reading an inference JSON body: 413 over 10 MB, invalid_json when it does not parse. */
import { RouterError } from '../errors/router-error'

export const inferenceBodyLimit = 10 * 1024 * 1024

export async function readJsonBody(request: Request, limit = inferenceBodyLimit): Promise<{ text: string; value: unknown }> {
  const declared = Number(request.headers.get('content-length') ?? 0)
  if (declared > limit) throw new RouterError('request_too_large')
  const text = await request.text()
  // Bytes, not characters: a multi-byte body can pass the character count and still be too large.
  if (text.length > limit / 4 && Buffer.byteLength(text) > limit) throw new RouterError('request_too_large')
  try {
    return { text, value: JSON.parse(text) }
  } catch {
    throw new RouterError('invalid_json')
  }
}

export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}
