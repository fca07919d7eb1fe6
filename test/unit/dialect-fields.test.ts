/**
 * The field table (docs/DIALECT-FIELDS.md) pinned, one case per row that changes what the model
 * does: for each inbound shape (messages, generateContent, Responses translated to chat), a request
 * field is translated (the chat fragment it becomes), dropped where SPEC or the table says so (and
 * then nothing of it goes upstream), or refused with 400 `invalid_request` naming the field. None is
 * lost without a word.
 */
import { describe, expect, test } from 'bun:test'
import { RouterError } from '../../src/errors/router-error'
import { messagesToChat, validateMessagesBody } from '../../src/dialects/messages/convert-request'
import { contentToChat, validateContentBody } from '../../src/dialects/content/convert-request'
import { chatToResponses, responsesToChat } from '../../src/dialects/responses/convert-request'
import { writeMessage } from '../../src/dialects/messages/convert-response'
import { writeGenerateContentResponse } from '../../src/dialects/content/convert-response'

type Json = Record<string, any>

const messages = (extra: Json) => messagesToChat(validateMessagesBody({ model: 'm', max_tokens: 50, messages: [{ role: 'user', content: 'Hi' }], ...extra }))
const content = (extra: Json) => contentToChat(validateContentBody({ contents: [{ role: 'user', parts: [{ text: 'Hi' }] }], ...extra }), 'm')
const responses = (extra: Json) => responsesToChat({ model: 'm', input: 'Hi', ...extra }).chat

function refusal(run: () => unknown): RouterError {
  try {
    run()
  } catch (error) {
    if (error instanceof RouterError) return error
    throw error
  }
  throw new Error('not refused')
}

const schema = { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] }
const tool = { name: 'lookup', description: 'Look up', input_schema: schema }

describe('messages → chat', () => {
  const translated: [string, Json, Json][] = [
    ['max_tokens', { max_tokens: 77 }, { max_tokens: 77 }],
    ['temperature', { temperature: 0.2 }, { temperature: 0.2 }],
    ['top_p', { top_p: 0.9 }, { top_p: 0.9 }],
    ['stop_sequences', { stop_sequences: ['END'] }, { stop: ['END'] }],
    ['stream', { stream: true }, { stream: true, stream_options: { include_usage: true } }],
    ['system (string)', { system: 'Be brief.' }, { messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hi' }] }],
    ['thinking enabled', { thinking: { type: 'enabled', budget_tokens: 2048 } }, { reasoning: { max_tokens: 2048 } }],
    ['output_config.effort', { output_config: { effort: 'low' } }, { reasoning_effort: 'low' }],
    ['output_config.format', { output_config: { format: { type: 'json_schema', schema } } }, { response_format: { type: 'json_schema', json_schema: { name: 'response', schema } } }],
    ['output_format (beta)', { output_format: { type: 'json_schema', schema } }, { response_format: { type: 'json_schema', json_schema: { name: 'response', schema } } }],
    ['tools', { tools: [tool] }, { tools: [{ type: 'function', function: { name: 'lookup', description: 'Look up', parameters: schema } }] }],
    ['tools[].strict', { tools: [{ ...tool, strict: true }] }, { tools: [{ type: 'function', function: { name: 'lookup', description: 'Look up', parameters: schema, strict: true } }] }],
    ['tool_choice auto', { tools: [tool], tool_choice: { type: 'auto' } }, { tool_choice: 'auto' }],
    ['tool_choice any', { tools: [tool], tool_choice: { type: 'any' } }, { tool_choice: 'required' }],
    ['tool_choice none', { tools: [tool], tool_choice: { type: 'none' } }, { tool_choice: 'none' }],
    ['tool_choice tool', { tools: [tool], tool_choice: { type: 'tool', name: 'lookup' } }, { tool_choice: { type: 'function', function: { name: 'lookup' } } }],
    ['disable_parallel_tool_use', { tools: [tool], tool_choice: { type: 'auto', disable_parallel_tool_use: true } }, { parallel_tool_calls: false }],
  ]
  for (const [field, extra, fragment] of translated) test(`translated: ${field}`, () => expect(messages(extra)).toMatchObject(fragment))

  test('translated: a system entry inside messages stays in place', () => {
    expect(messagesToChat(validateMessagesBody({ model: 'm', messages: [{ role: 'user', content: 'a' }, { role: 'system', content: 'b' }] })).messages).toEqual([
      { role: 'user', content: 'a' },
      { role: 'system', content: 'b' },
    ])
  })
  test('translated: a search_result block rides inline as text', () => {
    const chat = messagesToChat(validateMessagesBody({ model: 'm', messages: [{ role: 'user', content: [{ type: 'search_result', title: 'Otters', source: 'https://example.org/otters', content: [{ type: 'text', text: 'They hold hands.' }] }] }] }))
    expect(chat.messages).toEqual([{ role: 'user', content: 'Otters\nhttps://example.org/otters\nThey hold hands.' }])
  })

  test('translated: a document inside a tool_result follows the tool message as a user message; a search_result in it is text', () => {
    const chat = messagesToChat(
      validateMessagesBody({
        model: 'm',
        messages: [
          { role: 'assistant', content: [{ type: 'tool_use', id: 'tu_1', name: 'fetch', input: {} }] },
          {
            role: 'user',
            content: [
              {
                type: 'tool_result',
                tool_use_id: 'tu_1',
                content: [
                  { type: 'search_result', title: 'Otters', source: 'https://example.org', content: [{ type: 'text', text: 'They hold hands.' }] },
                  { type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: 'JVBERi0=' } },
                ],
              },
            ],
          },
        ],
      }),
    )
    expect(chat.messages.slice(1)).toEqual([
      { role: 'tool', tool_call_id: 'tu_1', content: 'Otters\nhttps://example.org\nThey hold hands.' },
      { role: 'user', content: [{ type: 'file', file: { filename: 'document.pdf', file_data: 'data:application/pdf;base64,JVBERi0=' } }] },
    ])
  })
  test('translated: document.context rides before the document; tools[].input_examples follow the description', () => {
    const withContext = messagesToChat(validateMessagesBody({ model: 'm', messages: [{ role: 'user', content: [{ type: 'document', context: 'The 2025 report.', source: { type: 'text', data: 'Otters: 12.' } }] }] }))
    expect(withContext.messages).toEqual([{ role: 'user', content: 'The 2025 report.\nOtters: 12.' }])
    const withExamples = messages({ tools: [{ ...tool, input_examples: [{ city: 'Lyon' }] }] })
    expect(withExamples.tools[0].function.description).toBe('Look up\n\nExamples of input:\n{"city":"Lyon"}')
  })

  const dropped: [string, Json][] = [
    ['top_k (SPEC)', { top_k: 5 }],
    ['metadata (SPEC)', { metadata: { user_id: 'u' } }],
    ['service_tier (SPEC)', { service_tier: 'auto' }],
    ['context_management (server-side context editing; the conversation goes whole)', { context_management: { edits: [{ type: 'clear_tool_uses_20250919' }] } }],
    ['thinking disabled (chat models reason only when asked)', { thinking: { type: 'disabled' } }],
  ]
  for (const [field, extra] of dropped) {
    test(`dropped: ${field}`, () => {
      const chat = messages(extra)
      expect(Object.keys(chat).sort()).toEqual(['max_tokens', 'messages', 'model'])
    })
  }

  const refused: [string, Json, string][] = [
    ['mcp_servers', { mcp_servers: [{ type: 'url', url: 'https://mcp.example.org', name: 'x' }] }, 'mcp_servers'],
    ['an image by file_id', { messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'file', file_id: 'file_1' } }] }] }, 'messages.0.content.0.source'],
    ['thinking.type unknown', { thinking: { type: 'sometimes' } }, 'thinking.type'],
    ['output_config.effort unknown', { output_config: { effort: 'extreme' } }, 'output_config.effort'],
    ['output_config.format not json_schema', { output_config: { format: { type: 'xml' } } }, 'output_config.format.type'],
    ['tool_choice of an unknown type', { tools: [tool], tool_choice: { type: 'sometimes' } }, 'tool_choice.type'],
    ['tool_choice tool without a name', { tools: [tool], tool_choice: { type: 'tool' } }, 'tool_choice.name'],
  ]
  for (const [what, extra, field] of refused) {
    test(`refused: ${what}`, () => {
      const error = refusal(() => messages(extra))
      expect([error.status, error.code]).toEqual([400, 'invalid_request'])
      expect(error.message.startsWith(`${field}:`)).toBe(true)
    })
  }
})

describe('generateContent → chat', () => {
  const declaration = { name: 'lookup', description: 'Look up', parameters: { type: 'OBJECT', properties: { city: { type: 'STRING', nullable: true } }, required: ['city'] } }
  const jsonSchema = { type: 'object', properties: { city: { type: ['string', 'null'] } }, required: ['city'] }
  const translated: [string, Json, Json][] = [
    ['temperature', { generationConfig: { temperature: 0.3 } }, { temperature: 0.3 }],
    ['topP', { generationConfig: { topP: 0.8 } }, { top_p: 0.8 }],
    ['maxOutputTokens', { generationConfig: { maxOutputTokens: 64 } }, { max_tokens: 64 }],
    ['stopSequences', { generationConfig: { stopSequences: ['END'] } }, { stop: ['END'] }],
    ['presencePenalty', { generationConfig: { presencePenalty: 0.5 } }, { presence_penalty: 0.5 }],
    ['frequencyPenalty', { generationConfig: { frequencyPenalty: 0.5 } }, { frequency_penalty: 0.5 }],
    ['seed', { generationConfig: { seed: 7 } }, { seed: 7 }],
    ['responseMimeType json', { generationConfig: { responseMimeType: 'application/json' } }, { response_format: { type: 'json_object' } }],
    ['responseSchema (Gemini Schema, converted)', { generationConfig: { responseMimeType: 'application/json', responseSchema: declaration.parameters } }, { response_format: { type: 'json_schema', json_schema: { name: 'response', schema: jsonSchema } } }],
    ['responseJsonSchema', { generationConfig: { responseMimeType: 'application/json', responseJsonSchema: schema } }, { response_format: { type: 'json_schema', json_schema: { name: 'response', schema } } }],
    ['thinkingBudget', { generationConfig: { thinkingConfig: { thinkingBudget: 1024 } } }, { reasoning: { max_tokens: 1024 } }],
    ['thinkingLevel', { generationConfig: { thinkingConfig: { thinkingLevel: 'LOW' } } }, { reasoning_effort: 'low' }],
    ['systemInstruction', { systemInstruction: { parts: [{ text: 'Be brief.' }] } }, { messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hi' }] }],
    ['functionDeclarations (parameters converted)', { tools: [{ functionDeclarations: [declaration] }] }, { tools: [{ type: 'function', function: { name: 'lookup', description: 'Look up', parameters: jsonSchema } }] }],
    ['functionCallingConfig NONE', { tools: [{ functionDeclarations: [declaration] }], toolConfig: { functionCallingConfig: { mode: 'NONE' } } }, { tool_choice: 'none' }],
    ['functionCallingConfig ANY', { tools: [{ functionDeclarations: [declaration, { ...declaration, name: 'other' }] }], toolConfig: { functionCallingConfig: { mode: 'ANY' } } }, { tool_choice: 'required' }],
    ['functionCallingConfig VALIDATED', { tools: [{ functionDeclarations: [declaration] }], toolConfig: { functionCallingConfig: { mode: 'VALIDATED' } } }, { tool_choice: 'auto', tools: [{ function: { strict: true } }] }],
  ]
  for (const [field, extra, fragment] of translated) test(`translated: ${field}`, () => expect(content(extra)).toMatchObject(fragment))

  test('translated: mediaResolution as the images\' detail', () => {
    const chat = content({ contents: [{ role: 'user', parts: [{ text: 'What is this?' }, { inlineData: { mimeType: 'image/png', data: 'iVBORw0KGgo=' } }] }], generationConfig: { mediaResolution: 'MEDIA_RESOLUTION_LOW' } })
    expect(chat.messages[0].content[1]).toEqual({ type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=', detail: 'low' } })
  })

  test('translated: allowedFunctionNames offers only those functions', () => {
    const chat = content({ tools: [{ functionDeclarations: [declaration, { ...declaration, name: 'other' }, { ...declaration, name: 'third' }] }], toolConfig: { functionCallingConfig: { mode: 'ANY', allowedFunctionNames: ['other', 'third'] } } })
    expect(chat.tools.map((tool: Json) => tool.function.name)).toEqual(['other', 'third'])
    expect(chat.tool_choice).toBe('required')
    const one = content({ tools: [{ functionDeclarations: [declaration, { ...declaration, name: 'other' }] }], toolConfig: { functionCallingConfig: { mode: 'ANY', allowedFunctionNames: ['other'] } } })
    expect(one.tool_choice).toEqual({ type: 'function', function: { name: 'other' } })
  })

  const dropped: [string, Json][] = [
    ['safetySettings (no chat equivalent)', { safetySettings: [{ category: 'HARM_CATEGORY_HARASSMENT', threshold: 'BLOCK_NONE' }] }],
    ['topK (as SPEC drops top_k)', { generationConfig: { topK: 40 } }],
    ['candidateCount 1', { generationConfig: { candidateCount: 1 } }],
    ['responseMimeType text/plain', { generationConfig: { responseMimeType: 'text/plain' } }],
  ]
  for (const [field, extra] of dropped) test(`dropped: ${field}`, () => expect(Object.keys(content(extra)).sort()).toEqual(['messages', 'model']))

  const refused: [string, Json, string][] = [
    ['cachedContent', { cachedContent: 'cachedContents/abc' }, 'cachedContent'],
    ['a hosted tool', { tools: [{ googleSearch: {} }] }, 'tools[0].googleSearch'],
    ['candidateCount above 1', { generationConfig: { candidateCount: 2 } }, 'generationConfig.candidateCount'],
    ['responseLogprobs', { generationConfig: { responseLogprobs: true } }, 'generationConfig.responseLogprobs'],
    ['responseMimeType enum', { generationConfig: { responseMimeType: 'text/x.enum' } }, 'generationConfig.responseMimeType'],
    ['responseSchema without the JSON MIME type', { generationConfig: { responseSchema: schema } }, 'generationConfig.responseSchema'],
    ['responseModalities AUDIO', { generationConfig: { responseModalities: ['AUDIO'] } }, 'generationConfig.responseModalities'],
    ['speechConfig', { generationConfig: { speechConfig: { voiceConfig: {} } } }, 'generationConfig.speechConfig'],
    ['thinkingLevel unknown', { generationConfig: { thinkingConfig: { thinkingLevel: 'enormous' } } }, 'generationConfig.thinkingConfig.thinkingLevel'],
    ['responseFormat (Vertex)', { generationConfig: { responseFormat: [{ text: { mimeType: 'application/json' } }] } }, 'generationConfig.responseFormat'],
    ['videoMetadata', { contents: [{ role: 'user', parts: [{ fileData: { mimeType: 'video/mp4', fileUri: 'gs://v' }, videoMetadata: { startOffset: '10s' } }] }] }, 'contents[0].parts[0].videoMetadata'],
  ]
  for (const [what, extra, field] of refused) {
    test(`refused: ${what}`, () => {
      const error = refusal(() => content(extra))
      expect([error.status, error.code]).toEqual([400, 'invalid_request'])
      expect(error.message.startsWith(`${field}:`)).toBe(true)
    })
  }
})

describe('Responses → chat (the translated gateway kind)', () => {
  const fn = { type: 'function', name: 'lookup', description: 'Look up', parameters: schema }
  const translated: [string, Json, Json][] = [
    ['instructions', { instructions: 'Be brief.' }, { messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hi' }] }],
    ['max_output_tokens', { max_output_tokens: 80 }, { max_tokens: 80 }],
    ['temperature', { temperature: 0.4 }, { temperature: 0.4 }],
    ['top_p', { top_p: 0.7 }, { top_p: 0.7 }],
    ['parallel_tool_calls', { tools: [fn], parallel_tool_calls: false }, { parallel_tool_calls: false }],
    ['tools (function, strict)', { tools: [{ ...fn, strict: true }] }, { tools: [{ type: 'function', function: { name: 'lookup', description: 'Look up', parameters: schema, strict: true } }] }],
    ['tool_choice string', { tools: [fn], tool_choice: 'required' }, { tool_choice: 'required' }],
    ['tool_choice function', { tools: [fn], tool_choice: { type: 'function', name: 'lookup' } }, { tool_choice: { type: 'function', function: { name: 'lookup' } } }],
    ['tool_choice allowed_tools', { tools: [fn], tool_choice: { type: 'allowed_tools', mode: 'required', tools: [{ type: 'function', name: 'lookup' }] } }, { tool_choice: { type: 'allowed_tools', allowed_tools: { mode: 'required', tools: [{ type: 'function', function: { name: 'lookup' } }] } } }],
    ['text.format json_schema', { text: { format: { type: 'json_schema', name: 'city', schema, strict: true } } }, { response_format: { type: 'json_schema', json_schema: { name: 'city', schema, strict: true } } }],
    ['text.format json_object', { text: { format: { type: 'json_object' } } }, { response_format: { type: 'json_object' } }],
    ['text.verbosity', { text: { verbosity: 'low' } }, { verbosity: 'low' }],
    ['reasoning.effort', { reasoning: { effort: 'high' } }, { reasoning_effort: 'high' }],
    ['stream', { stream: true }, { stream: true, stream_options: { include_usage: true } }],
  ]
  for (const [field, extra, fragment] of translated) test(`translated: ${field}`, () => expect(responses(extra)).toMatchObject(fragment))

  test('translated: a namespace of functions is offered function by function', () => {
    const chat = responses({ tools: [{ type: 'namespace', name: 'multi_agent_v1', description: 'Agents', tools: [{ ...fn, name: 'spawn_agent' }, { ...fn, name: 'wait_agent' }] }, fn] })
    expect((chat.tools as Json[]).map((tool) => tool.function.name)).toEqual(['spawn_agent', 'wait_agent', 'lookup'])
  })

  for (const type of ['compaction', 'item_reference', 'custom_tool_call', 'custom_tool_call_output']) {
    test(`refused: input item ${type}`, () => {
      const error = refusal(() => responses({ input: [{ role: 'user', content: 'Hi' }, { type, id: 'x' }] }))
      expect([error.status, error.code]).toEqual([400, 'invalid_request'])
      expect(error.message.startsWith(`input item ${type}:`)).toBe(true)
    })
  }
  test('refused: a custom tool, a custom tool_choice, reasoning.mode pro, newer input items', () => {
    const cases: [Json, string][] = [
      [{ tools: [{ type: 'custom', name: 'apply_patch', format: { type: 'text' } }] }, 'tools:'],
      [{ tools: [fn], tool_choice: { type: 'custom', name: 'apply_patch' } }, 'tool_choice:'],
      [{ reasoning: { effort: 'high', mode: 'pro' } }, 'reasoning.mode:'],
      [{ input: [{ role: 'user', content: 'Hi' }, { type: 'additional_tools', tools: [] }] }, 'input item additional_tools:'],
    ]
    for (const [extra, start] of cases) expect(refusal(() => responses(extra)).message.startsWith(start)).toBe(true)
  })
  test('dropped: context_management (a compaction threshold; nothing the model reads is lost)', () => {
    expect(responses({ context_management: [{ type: 'compaction', compact_threshold: 100000 }] }).context_management).toBeUndefined()
  })
  test('refused: an input_image by file_id', () => {
    const error = refusal(() => responses({ input: [{ role: 'user', content: [{ type: 'input_image', file_id: 'file_1' }] }] }))
    expect(error.message.startsWith('input_image.file_id:')).toBe(true)
  })

  test('refused: prompt (a stored template only the vendor can expand)', () => {
    const error = refusal(() => responses({ prompt: { id: 'pmpt_1' } }))
    expect([error.status, error.code]).toEqual([400, 'invalid_request'])
    expect(error.message.startsWith('prompt:')).toBe(true)
  })
})

describe('chat → Responses (the responses-only gateway kind)', () => {
  const translated: [string, Json, Json][] = [
    ['verbosity', { verbosity: 'high' }, { text: { verbosity: 'high' } }],
    ['logprobs and top_logprobs', { logprobs: true, top_logprobs: 3 }, { include: ['message.output_text.logprobs'], top_logprobs: 3 }],
    ['a thinking budget as an effort', { reasoning: { max_tokens: 4096 } }, { reasoning: { effort: 'medium' } }],
    ['allowed_tools', { tool_choice: { type: 'allowed_tools', allowed_tools: { mode: 'auto', tools: [{ type: 'function', function: { name: 'lookup' } }] } } }, { tool_choice: { type: 'allowed_tools', mode: 'auto', tools: [{ type: 'function', name: 'lookup' }] } }],
    ['response_format with verbosity', { verbosity: 'low', response_format: { type: 'json_object' } }, { text: { verbosity: 'low', format: { type: 'json_object' } } }],
  ]
  for (const [field, extra, fragment] of translated) test(`translated: ${field}`, () => expect(chatToResponses({ model: 'm', messages: [{ role: 'user', content: 'Hi' }], ...extra })).toMatchObject(fragment))

  const refused: [string, Json, string][] = [
    ['stop', { stop: ['END'] }, 'stop'],
    ['seed', { seed: 7 }, 'seed'],
    ['presence_penalty', { presence_penalty: 0.5 }, 'presence_penalty'],
    ['frequency_penalty', { frequency_penalty: 0.5 }, 'frequency_penalty'],
    ['n above 1', { n: 2 }, 'n'],
  ]
  for (const [what, extra, field] of refused) {
    test(`refused: ${what}`, () => {
      const error = refusal(() => chatToResponses({ model: 'm', messages: [{ role: 'user', content: 'Hi' }], ...extra }))
      expect([error.status, error.code]).toEqual([400, 'invalid_request'])
      expect(error.message.startsWith(`${field}:`)).toBe(true)
    })
  }
})

describe('answer-shape switches', () => {
  const reply = { id: 'r1', text: 'Lyon.', reasoning: 'The user asks where.', reasoningSignature: 'sig', toolCalls: [], finishReason: 'stop', usage: { inputTokens: 5, outputTokens: 9, reasoningTokens: 4 } } as any
  test("messages thinking.display 'omitted': the thinking block stays, without its text", () => {
    expect(writeMessage(reply, 'm', undefined, true).content[0]).toEqual({ type: 'thinking', thinking: '', signature: 'sig' })
    expect(writeMessage(reply, 'm', undefined).content[0]).toEqual({ type: 'thinking', thinking: 'The user asks where.', signature: 'sig' })
  })
  test('generateContent includeThoughts false: no thought parts, their tokens still counted', () => {
    const hidden = writeGenerateContentResponse(reply, 'm', true)
    expect(hidden.candidates[0]!.content.parts).toEqual([{ text: 'Lyon.' }])
    expect(writeGenerateContentResponse(reply, 'm').candidates[0]!.content.parts).toEqual([{ text: 'The user asks where.', thought: true }, { text: 'Lyon.' }])
  })
})
