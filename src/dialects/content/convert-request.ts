/**
 * generateContent-dialect request → chat request: contents (text, inline data, file data, function
 * calls and responses), systemInstruction, generationConfig (Gemini `Schema`s converted to JSON
 * Schema, thinking level and budget as chat reasoning settings), function declarations and the
 * function-calling mode with its allowed names. Safety settings have no chat equivalent and are
 * dropped; what would change the answer and cannot be said in chat (cached content, hosted tools,
 * several candidates, log probabilities, non-text output, a response MIME type other than text or
 * JSON) is refused naming the field. docs/DIALECT-FIELDS.md lists every field.
 */
import { RouterError } from '../../errors/router-error'

type Json = Record<string, any>

function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

const invalid = (message: string) => new RouterError('invalid_request', message)

export function validateContentBody(value: unknown): Json & { contents: Json[] } {
  if (!isObject(value)) throw invalid('The request body must be a JSON object.')
  if (!Array.isArray(value.contents) || value.contents.length === 0) throw new RouterError('missing_messages', 'contents: a non-empty array is required.')
  value.contents.forEach((content: unknown, index: number) => {
    if (!isObject(content)) throw invalid(`contents[${index}]: expected an object.`)
    if (content.role !== undefined && content.role !== 'user' && content.role !== 'model' && content.role !== 'function') {
      throw invalid(`contents[${index}].role: expected 'user' or 'model'.`)
    }
    if (!Array.isArray(content.parts) || content.parts.length === 0) throw invalid(`contents[${index}].parts: a non-empty array is required.`)
    content.parts.forEach((part: unknown, partIndex: number) => {
      if (!isObject(part)) throw invalid(`contents[${index}].parts[${partIndex}]: expected a Part object.`)
      if (part.videoMetadata !== undefined) throw invalid(`contents[${index}].parts[${partIndex}].videoMetadata: clips of a video cannot be sent to a chat gateway; send the clip itself.`)
    })
  })
  if (value.systemInstruction !== undefined && isObject(value.systemInstruction) && value.systemInstruction.parts !== undefined) {
    if (!Array.isArray(value.systemInstruction.parts) || !value.systemInstruction.parts.every(isObject)) {
      throw invalid('systemInstruction.parts: expected an array of Part objects.')
    }
  }
  if (value.generationConfig !== undefined && !isObject(value.generationConfig)) throw invalid('generationConfig: expected an object.')
  if (value.systemInstruction !== undefined && !isObject(value.systemInstruction) && typeof value.systemInstruction !== 'string') {
    throw invalid('systemInstruction: expected a Content object.')
  }
  if (value.tools !== undefined && !Array.isArray(value.tools)) throw invalid('tools: expected an array.')
  ;(value.tools ?? []).forEach((tool: unknown, index: number) => {
    if (!isObject(tool)) throw invalid(`tools[${index}]: expected a Tool object.`)
    if (tool.functionDeclarations === undefined) return
    if (!Array.isArray(tool.functionDeclarations)) throw invalid(`tools[${index}].functionDeclarations: expected an array.`)
    tool.functionDeclarations.forEach((declaration: unknown, declarationIndex: number) => {
      if (!isObject(declaration) || typeof declaration.name !== 'string' || declaration.name === '') {
        throw invalid(`tools[${index}].functionDeclarations[${declarationIndex}].name: a non-empty string is required.`)
      }
    })
  })
  if (value.toolConfig !== undefined && !isObject(value.toolConfig)) throw invalid('toolConfig: expected an object.')
  refuseUnsayable(value)
  return value as Json & { contents: Json[] }
}

/** The hosted tools of the Gemini API, which a chat gateway cannot run. */
const hostedTools = ['googleSearch', 'googleSearchRetrieval', 'codeExecution', 'urlContext', 'fileSearch', 'googleMaps', 'computerUse', 'retrieval', 'enterpriseWebSearch', 'mcpServers']

/** Fields that change the answer and have no chat equivalent: refused, naming the field, rather than lost. */
function refuseUnsayable(value: Json) {
  if (value.cachedContent !== undefined && value.cachedContent !== null && value.cachedContent !== '') {
    throw invalid('cachedContent: cached content lives at one Gemini project and cannot be sent to a chat gateway; send its contents instead.')
  }
  ;(value.tools ?? []).forEach((tool: Json, index: number) => {
    for (const name of hostedTools) if (tool[name] !== undefined) throw invalid(`tools[${index}].${name}: hosted Gemini tools cannot be run through a chat gateway; declare functions instead.`)
  })
  const config = isObject(value.generationConfig) ? value.generationConfig : {}
  if (Array.isArray(config.responseFormat) && config.responseFormat.length > 0) throw invalid('generationConfig.responseFormat: use responseMimeType with responseSchema or responseJsonSchema.')
  if (config.candidateCount !== undefined && config.candidateCount !== 1) throw invalid('generationConfig.candidateCount: only 1 is served.')
  if (config.responseLogprobs === true || config.logprobs !== undefined) throw invalid(`generationConfig.${config.responseLogprobs === true ? 'responseLogprobs' : 'logprobs'}: log probabilities are not served on this shape.`)
  const mime = config.responseMimeType
  if (mime !== undefined && mime !== 'text/plain' && mime !== 'application/json') throw invalid(`generationConfig.responseMimeType: expected 'text/plain' or 'application/json'.`)
  if ((config.responseSchema !== undefined || config.responseJsonSchema !== undefined) && mime !== 'application/json') {
    throw invalid(`generationConfig.${config.responseSchema !== undefined ? 'responseSchema' : 'responseJsonSchema'}: needs responseMimeType 'application/json'.`)
  }
  if (Array.isArray(config.responseModalities) && config.responseModalities.some((modality: unknown) => String(modality).toUpperCase() !== 'TEXT')) {
    throw invalid('generationConfig.responseModalities: only TEXT is served.')
  }
  for (const name of ['speechConfig', 'imageConfig', 'audioTimestamp'] as const) {
    if (config[name] !== undefined && config[name] !== null && config[name] !== false) throw invalid(`generationConfig.${name}: only text answers are served.`)
  }
  const calling = isObject(value.toolConfig) ? value.toolConfig.functionCallingConfig : undefined
  if (isObject(calling) && calling.mode !== undefined && !['AUTO', 'ANY', 'NONE', 'VALIDATED', 'MODE_UNSPECIFIED'].includes(calling.mode)) {
    throw invalid("toolConfig.functionCallingConfig.mode: expected 'AUTO', 'ANY', 'NONE' or 'VALIDATED'.")
  }
  const thinking = isObject(config.thinkingConfig) ? config.thinkingConfig : undefined
  if (thinking?.thinkingLevel !== undefined && !thinkingLevels.has(String(thinking.thinkingLevel).toLowerCase())) {
    throw invalid("generationConfig.thinkingConfig.thinkingLevel: expected 'minimal', 'low', 'medium' or 'high'.")
  }
}

/** Gemini thinking levels → chat reasoning effort. */
const thinkingLevels = new Map<string, string>([
  ['minimal', 'minimal'],
  ['low', 'low'],
  ['medium', 'medium'],
  ['high', 'high'],
])

/**
 * A Gemini `Schema` (OpenAPI 3.0 subset: upper-case types, `nullable`, `format`, …) as JSON Schema,
 * which chat's `response_format` and function parameters take. A schema already in JSON Schema form
 * (lower-case types) comes through unchanged.
 */
export function geminiSchemaToJsonSchema(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(geminiSchemaToJsonSchema)
  if (!isObject(schema)) return schema
  const out: Json = {}
  for (const [name, value] of Object.entries(schema)) {
    if (name === 'nullable' || name === 'propertyOrdering') continue
    if (name === 'type' && typeof value === 'string') out.type = value.toLowerCase()
    else if (name === 'properties' && isObject(value)) out.properties = Object.fromEntries(Object.entries(value).map(([key, inner]) => [key, geminiSchemaToJsonSchema(inner)]))
    else if (name === 'items' || name === 'anyOf' || name === 'not' || name === 'additionalProperties') out[name] = geminiSchemaToJsonSchema(value)
    else out[name] = value
  }
  if (schema.nullable === true && typeof out.type === 'string') out.type = [out.type, 'null']
  return out
}

/** generationConfig.mediaResolution → chat's image `detail`. */
const imageDetail: Record<string, string> = { MEDIA_RESOLUTION_LOW: 'low', MEDIA_RESOLUTION_MEDIUM: 'auto', MEDIA_RESOLUTION_HIGH: 'high' }

function partToChat(part: Json, detail?: string): Json | undefined {
  if (typeof part.text === 'string') return part.thought === true ? undefined : { type: 'text', text: part.text }
  if (isObject(part.inlineData)) {
    const mime = String(part.inlineData.mimeType ?? 'application/octet-stream')
    const url = `data:${mime};base64,${part.inlineData.data ?? ''}`
    return mime.startsWith('image/') ? { type: 'image_url', image_url: { url, ...(detail ? { detail } : {}) } } : { type: 'file', file: { file_data: url } }
  }
  if (isObject(part.fileData)) {
    const mime = String(part.fileData.mimeType ?? '')
    const uri = String(part.fileData.fileUri ?? '')
    return mime.startsWith('image/') ? { type: 'image_url', image_url: { url: uri, ...(detail ? { detail } : {}) } } : { type: 'file', file: { file_data: uri } }
  }
  return undefined
}

export function contentToChat(body: Json, model: string): Json {
  const messages: Json[] = []
  const instruction = body.systemInstruction
  const systemText =
    typeof instruction === 'string'
      ? instruction
      : isObject(instruction) && Array.isArray(instruction.parts)
        ? instruction.parts.map((part: Json) => String(part?.text ?? '')).join('\n')
        : ''
  if (systemText) messages.push({ role: 'system', content: systemText })
  // Calls are matched to responses by name, in order (the dialect has no call ids).
  const pendingCalls = new Map<string, string[]>()
  let callCounter = 0
  for (const content of body.contents as Json[]) {
    const parts = content.parts as Json[]
    if (content.role === 'model') {
      let text = ''
      const toolCalls: Json[] = []
      for (const part of parts) {
        if (typeof part.text === 'string' && part.thought !== true) text += part.text
        if (isObject(part.functionCall)) {
          const name = String(part.functionCall.name ?? '')
          const id = typeof part.functionCall.id === 'string' ? part.functionCall.id : `call_${++callCounter}`
          pendingCalls.set(name, [...(pendingCalls.get(name) ?? []), id])
          toolCalls.push({ id, type: 'function', function: { name, arguments: JSON.stringify(part.functionCall.args ?? {}) } })
        }
      }
      if (text || toolCalls.length) messages.push({ role: 'assistant', content: toolCalls.length && !text ? null : text, ...(toolCalls.length ? { tool_calls: toolCalls } : {}) })
      continue
    }
    const chatParts: Json[] = []
    for (const part of parts) {
      if (isObject(part.functionResponse)) {
        const name = String(part.functionResponse.name ?? '')
        const queue = pendingCalls.get(name) ?? []
        const id = typeof part.functionResponse.id === 'string' ? part.functionResponse.id : (queue.shift() ?? `call_${++callCounter}`)
        pendingCalls.set(name, queue)
        messages.push({ role: 'tool', tool_call_id: id, content: JSON.stringify(part.functionResponse.response ?? {}) })
        continue
      }
      const converted = partToChat(part, imageDetail[String(part.mediaResolution?.level ?? body.generationConfig?.mediaResolution ?? '')])
      if (converted) chatParts.push(converted)
    }
    if (chatParts.length) {
      messages.push({ role: 'user', content: chatParts.every((part) => part.type === 'text') ? chatParts.map((part) => part.text).join('') : chatParts })
    }
  }
  const chat: Json = { model, messages }
  const config = isObject(body.generationConfig) ? body.generationConfig : {}
  if (config.temperature !== undefined) chat.temperature = config.temperature
  if (config.topP !== undefined) chat.top_p = config.topP
  if (config.maxOutputTokens !== undefined) chat.max_tokens = config.maxOutputTokens
  if (Array.isArray(config.stopSequences) && config.stopSequences.length) chat.stop = config.stopSequences
  if (config.presencePenalty !== undefined) chat.presence_penalty = config.presencePenalty
  if (config.frequencyPenalty !== undefined) chat.frequency_penalty = config.frequencyPenalty
  if (config.seed !== undefined) chat.seed = config.seed
  if (config.responseMimeType === 'application/json') {
    const schema = config.responseJsonSchema ?? (config.responseSchema !== undefined ? geminiSchemaToJsonSchema(config.responseSchema) : undefined)
    chat.response_format = schema ? { type: 'json_schema', json_schema: { name: 'response', schema } } : { type: 'json_object' }
  }
  const thinking = isObject(config.thinkingConfig) ? config.thinkingConfig : undefined
  if (thinking && typeof thinking.thinkingBudget === 'number' && thinking.thinkingBudget > 0) chat.reasoning = { max_tokens: thinking.thinkingBudget }
  else if (thinking?.thinkingLevel !== undefined) chat.reasoning_effort = thinkingLevels.get(String(thinking.thinkingLevel).toLowerCase())
  const calling = isObject(body.toolConfig) && isObject(body.toolConfig.functionCallingConfig) ? body.toolConfig.functionCallingConfig : undefined
  const allowed: string[] = Array.isArray(calling?.allowedFunctionNames) ? calling.allowedFunctionNames.map(String) : []
  let declarations = (Array.isArray(body.tools) ? body.tools : []).flatMap((tool: Json) => (Array.isArray(tool?.functionDeclarations) ? tool.functionDeclarations : []))
  // allowedFunctionNames narrows what the model may call: only those are offered.
  if (allowed.length) declarations = declarations.filter((declaration: Json) => allowed.includes(declaration.name))
  if (declarations.length) {
    chat.tools = declarations.map((declaration: Json) => ({
      type: 'function',
      function: {
        name: declaration.name,
        ...(declaration.description !== undefined ? { description: declaration.description } : {}),
        parameters: declaration.parametersJsonSchema ?? (declaration.parameters !== undefined ? geminiSchemaToJsonSchema(declaration.parameters) : { type: 'object', properties: {} }),
        // VALIDATED: calls must follow the declared schemas.
        ...(calling?.mode === 'VALIDATED' ? { strict: true } : {}),
      },
    }))
  }
  if (calling) {
    if (calling.mode === 'NONE') chat.tool_choice = 'none'
    else if (calling.mode === 'ANY') chat.tool_choice = declarations.length === 1 ? { type: 'function', function: { name: declarations[0].name } } : 'required'
    else if (calling.mode === 'AUTO' || calling.mode === 'VALIDATED') chat.tool_choice = 'auto'
  }
  return chat
}
