/** Reading an inference JSON body: 413 over 10 MB, invalid_json when it does not parse. */
import { RouterError } from '../errors/router-error'

export const inferenceBodyLimit = 10 * 1024 * 1024

const utf8 = new TextDecoder()

export interface JsonBody {
  /** The body as sent: it goes upstream as these bytes when nothing in it has to change. */
  bytes: Uint8Array<ArrayBuffer>
  text: string
  value: unknown
}

export async function readJsonBody(request: Request, limit = inferenceBodyLimit): Promise<JsonBody> {
  const declared = Number(request.headers.get('content-length') ?? 0)
  if (declared > limit) throw new RouterError('request_too_large')
  const bytes = await request.bytes()
  if (bytes.byteLength > limit) throw new RouterError('request_too_large')
  const text = utf8.decode(bytes)
  try {
    return { bytes, text, value: JSON.parse(text) }
  } catch {
    throw new RouterError('invalid_json')
  }
}

export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}
