/** Resolves an inference path to its endpoint (SPEC "Endpoints", "API shapes"). Unknown → undefined. */
import type { InferenceRoute } from '../../pipeline'

const chatShapes = ['chat', 'chat_router'] as const

/** Percent-decoding that treats a malformed escape as an unknown path instead of throwing. */
function decodeSegment(text: string): string | undefined {
  try {
    return decodeURIComponent(text)
  } catch {
    return undefined
  }
}
const allShapes = ['chat', 'chat_router', 'messages', 'content', 'decisions'] as const

export function resolveInferenceRoute(method: string, pathname: string): InferenceRoute | undefined {
  const path = pathname.length > 4 && pathname.endsWith('/') ? pathname.slice(0, -1) : pathname
  if (!path.startsWith('/v1/')) return undefined
  const rest = path.slice(4)
  if (method === 'POST') {
    switch (rest) {
      case 'chat/completions':
        return { endpoint: 'chat', shapes: chatShapes, envelope: 'chat' }
      case 'embeddings':
        return { endpoint: 'embeddings', shapes: chatShapes, envelope: 'chat' }
      case 'messages':
        return { endpoint: 'messages', shapes: ['messages'], envelope: 'messages' }
      case 'messages/count_tokens':
        return { endpoint: 'count_tokens', shapes: ['messages'], envelope: 'messages' }
      case 'responses':
        return { endpoint: 'responses', shapes: chatShapes, envelope: 'chat' }
      case 'decisions':
        return { endpoint: 'decisions', shapes: ['decisions'], envelope: 'chat' }
      case 'batches':
        return { endpoint: 'batches', shapes: chatShapes, envelope: 'chat' }
    }
    if (rest.startsWith('models/')) {
      // The model part may contain slashes (SPEC "POST /models/{modelPath}:generateContent").
      const match = /^models\/(.+):(generateContent|streamGenerateContent)$/.exec(rest)
      const parameter = match ? decodeSegment(match[1]!) : undefined
      if (match && parameter !== undefined) {
        return {
          endpoint: match[2] === 'generateContent' ? 'generate_content' : 'stream_generate_content',
          shapes: ['content'],
          envelope: 'content',
          parameter,
        }
      }
    }
    return undefined
  }
  if (method === 'GET') {
    if (rest === 'models') return { endpoint: 'models', shapes: allShapes, envelope: 'chat' }
    if (rest.startsWith('models/') && rest.length > 'models/'.length) {
      const parameter = decodeSegment(rest.slice('models/'.length))
      return parameter === undefined ? undefined : { endpoint: 'model', shapes: chatShapes, envelope: 'chat', parameter }
    }
    if (rest.startsWith('responses/') && rest.length > 'responses/'.length) {
      const parameter = decodeSegment(rest.slice('responses/'.length))
      return parameter === undefined ? undefined : { endpoint: 'responses_get', shapes: chatShapes, envelope: 'chat', parameter }
    }
    if (rest === 'batches' || rest.startsWith('batches/')) return { endpoint: 'batches', shapes: chatShapes, envelope: 'chat' }
    return undefined
  }
  if (method === 'DELETE' && rest.startsWith('batches/')) return { endpoint: 'batches', shapes: chatShapes, envelope: 'chat' }
  return undefined
}
