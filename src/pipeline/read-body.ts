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
  return parseJsonBody(await readBodyBytes(request, limit), limit)
}

/** The body's bytes; refused before reading when the declared length is over `limit`. */
export function readBodyBytes(request: Request, limit = inferenceBodyLimit): Promise<Uint8Array<ArrayBuffer>> {
  const declared = request.headers.get('content-length')
  if (declared !== null && Number(declared) > limit) throw new RouterError('request_too_large')
  return request.bytes()
}

/** Parses bytes read by readBodyBytes (refused over `limit`: a chunked body declares no length). */
export function parseJsonBody(bytes: Uint8Array<ArrayBuffer>, limit = inferenceBodyLimit): JsonBody {
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
