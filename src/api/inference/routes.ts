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

/** Routes without a path parameter are constants: resolving one allocates nothing. */
const fixedRoute = (endpoint: InferenceRoute['endpoint'], shapes: readonly string[], envelope: InferenceRoute['envelope']): InferenceRoute => Object.freeze({ endpoint, shapes, envelope })
const chatRoute = fixedRoute('chat', chatShapes, 'chat')
const embeddingsRoute = fixedRoute('embeddings', chatShapes, 'chat')
const messagesRoute = fixedRoute('messages', ['messages'], 'messages')
const countTokensRoute = fixedRoute('count_tokens', ['messages'], 'messages')
const responsesRoute = fixedRoute('responses', chatShapes, 'chat')
const decisionsRoute = fixedRoute('decisions', ['decisions'], 'chat')
const modelsRoute = fixedRoute('models', allShapes, 'chat')
const batchesRoute = fixedRoute('batches', chatShapes, 'chat')

export function resolveInferenceRoute(method: string, pathname: string): InferenceRoute | undefined {
  const path = pathname.length > 4 && pathname.endsWith('/') ? pathname.slice(0, -1) : pathname
  if (!path.startsWith('/v1/')) return undefined
  const rest = path.slice(4)
  if (method === 'POST') {
    switch (rest) {
      case 'chat/completions':
        return chatRoute
      case 'embeddings':
        return embeddingsRoute
      case 'messages':
        return messagesRoute
      case 'messages/count_tokens':
        return countTokensRoute
      case 'responses':
        return responsesRoute
      case 'decisions':
        return decisionsRoute
      case 'batches':
        return batchesRoute
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
    if (rest === 'models') return modelsRoute
    if (rest.startsWith('models/') && rest.length > 'models/'.length) {
      const parameter = decodeSegment(rest.slice('models/'.length))
      return parameter === undefined ? undefined : { endpoint: 'model', shapes: chatShapes, envelope: 'chat', parameter }
    }
    if (rest.startsWith('responses/') && rest.length > 'responses/'.length) {
      const parameter = decodeSegment(rest.slice('responses/'.length))
      return parameter === undefined ? undefined : { endpoint: 'responses_get', shapes: chatShapes, envelope: 'chat', parameter }
    }
    if (rest === 'batches' || rest.startsWith('batches/')) return batchesRoute
    return undefined
  }
  if (method === 'DELETE' && rest.startsWith('batches/')) return batchesRoute
  return undefined
}
