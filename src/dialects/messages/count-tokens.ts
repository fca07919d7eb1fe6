/**
 * Local token estimate for POST /messages/count_tokens (SPEC): text at about 4 characters per
 * token plus a small per-message overhead; images at width × height / 750 after the 1568-pixel
 * downscale when their size can be read from PNG, JPEG, GIF or WebP data, else 1,600; PDF
 * documents 1,600 each; tool definitions by their JSON length. Nothing goes upstream.
 */
type Json = Record<string, any>

const charactersPerToken = 4
const perMessageOverhead = 3
const requestOverhead = 3
const unreadableImageTokens = 1600
const documentTokens = 1600
const maxLongEdge = 1568

const textTokens = (text: string) => Math.ceil(text.length / charactersPerToken)

export function imageSize(bytes: Uint8Array): { width: number; height: number } | undefined {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  // PNG: signature, then IHDR width/height (big-endian) at 16 and 20.
  if (bytes.length >= 24 && bytes[0] === 0x89 && bytes[1] === 0x50 && bytes[2] === 0x4e && bytes[3] === 0x47) {
    return { width: view.getUint32(16), height: view.getUint32(20) }
  }
  // GIF: "GIF8", logical screen width/height (little-endian) at 6 and 8.
  if (bytes.length >= 10 && bytes[0] === 0x47 && bytes[1] === 0x49 && bytes[2] === 0x46 && bytes[3] === 0x38) {
    return { width: view.getUint16(6, true), height: view.getUint16(8, true) }
  }
  // WebP: RIFF....WEBP then VP8 / VP8L / VP8X.
  if (bytes.length >= 30 && view.getUint32(0) === 0x52494646 && view.getUint32(8) === 0x57454250) {
    const chunk = String.fromCharCode(bytes[12]!, bytes[13]!, bytes[14]!, bytes[15]!)
    if (chunk === 'VP8 ') return { width: view.getUint16(26, true) & 0x3fff, height: view.getUint16(28, true) & 0x3fff }
    if (chunk === 'VP8L') {
      const bits = view.getUint32(21, true)
      return { width: (bits & 0x3fff) + 1, height: ((bits >> 14) & 0x3fff) + 1 }
    }
    if (chunk === 'VP8X') {
      const width = 1 + (bytes[24]! | (bytes[25]! << 8) | (bytes[26]! << 16))
      const height = 1 + (bytes[27]! | (bytes[28]! << 8) | (bytes[29]! << 16))
      return { width, height }
    }
    return undefined
  }
  // JPEG: walk the segments to the first start-of-frame marker.
  if (bytes.length >= 4 && bytes[0] === 0xff && bytes[1] === 0xd8) {
    let offset = 2
    while (offset + 9 < bytes.length) {
      if (bytes[offset] !== 0xff) {
        offset++
        continue
      }
      const marker = bytes[offset + 1]!
      if (marker === 0xd8 || marker === 0x01 || (marker >= 0xd0 && marker <= 0xd7)) {
        offset += 2
        continue
      }
      const length = view.getUint16(offset + 2)
      const isStartOfFrame = marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc
      if (isStartOfFrame) return { width: view.getUint16(offset + 7), height: view.getUint16(offset + 5) }
      offset += 2 + length
    }
  }
  return undefined
}

export function imageTokens(base64: string | undefined): number {
  if (!base64) return unreadableImageTokens
  let size: { width: number; height: number } | undefined
  try {
    size = imageSize(Buffer.from(base64, 'base64'))
  } catch {
    size = undefined
  }
  if (!size || size.width <= 0 || size.height <= 0) return unreadableImageTokens
  let { width, height } = size
  const longEdge = Math.max(width, height)
  if (longEdge > maxLongEdge) {
    const scale = maxLongEdge / longEdge
    width = Math.round(width * scale)
    height = Math.round(height * scale)
  }
  return Math.ceil((width * height) / 750)
}

function imageSourceData(source: Json | undefined): string | undefined {
  if (!source) return undefined
  if (source.type === 'base64' && typeof source.data === 'string') return source.data
  if (source.type === 'url' && typeof source.url === 'string') {
    const match = /^data:image\/(?:png|jpeg|jpg|gif|webp);base64,(.*)$/i.exec(source.url)
    return match?.[1]
  }
  return undefined
}

function blockTokens(block: Json): number {
  switch (block?.type) {
    case 'text':
      return textTokens(String(block.text ?? ''))
    case 'image':
      return imageTokens(imageSourceData(block.source))
    case 'document':
      if (block.source?.type === 'text') return textTokens(String(block.source.data ?? ''))
      return documentTokens
    case 'tool_use':
      return textTokens(String(block.name ?? '')) + textTokens(JSON.stringify(block.input ?? {}))
    case 'tool_result':
      if (typeof block.content === 'string') return textTokens(block.content)
      return (Array.isArray(block.content) ? block.content : []).reduce((sum: number, item: Json) => sum + blockTokens(item), 0)
    case 'thinking':
    case 'redacted_thinking':
      // Earlier-turn thinking is stripped before the request goes upstream.
      return 0
    default:
      return textTokens(JSON.stringify(block ?? ''))
  }
}

function contentTokens(content: unknown): number {
  if (typeof content === 'string') return textTokens(content)
  if (!Array.isArray(content)) return 0
  return content.reduce((sum: number, block: Json) => sum + blockTokens(block), 0)
}

export function estimateInputTokens(body: Json, steering: string | null | undefined): number {
  let total = requestOverhead
  const system = typeof body.system === 'string' ? body.system : Array.isArray(body.system) ? body.system.map((block: Json) => String(block?.text ?? '')).join('\n') : ''
  const systemText = steering ? `${steering}\n\n${system}` : system
  if (systemText) total += textTokens(systemText) + perMessageOverhead
  for (const message of Array.isArray(body.messages) ? body.messages : []) total += perMessageOverhead + contentTokens(message?.content)
  if (Array.isArray(body.tools) && body.tools.length) total += textTokens(JSON.stringify(body.tools))
  return total
}
