/**
 * Every text a request sends upstream, rewritten in place of a copy (CONTRACT §17 "Input"): in the
 * chat form (messages' content, text parts, tool results, tool-call arguments), the Responses form
 * (instructions, input text and items, function calls' arguments and outputs) and an embeddings
 * request's input. A body whose texts are unchanged is returned as it is. Tool-call arguments are
 * JSON text: their string values are rewritten one by one and the JSON written again (a text that
 * is not JSON is rewritten as a text).
 */

/** Rewrites one text; returns it unchanged when nothing in it changes. */
export type RewriteText = (text: string) => string

type Json = Record<string, unknown>

const isObject = (value: unknown): value is Json => typeof value === 'object' && value !== null && !Array.isArray(value)

/** A JSON value's strings rewritten (the same value when none changed). */
function rewriteStrings(value: unknown, rewrite: RewriteText): unknown {
  if (typeof value === 'string') return rewrite(value)
  if (Array.isArray(value)) {
    let copy: unknown[] | undefined
    value.forEach((item, index) => {
      const next = rewriteStrings(item, rewrite)
      if (next !== item) (copy ??= [...value])[index] = next
    })
    return copy ?? value
  }
  if (isObject(value)) {
    let copy: Json | undefined
    for (const name in value) {
      const item = value[name]
      const next = rewriteStrings(item, rewrite)
      if (next !== item) (copy ??= { ...value })[name] = next
    }
    return copy ?? value
  }
  return value
}

/** Tool-call arguments (JSON text) with their string values rewritten. */
export function rewriteArguments(text: string, rewrite: RewriteText): string {
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    return rewrite(text)
  }
  const next = rewriteStrings(value, rewrite)
  return next === value ? text : JSON.stringify(next)
}

/** A content value (a string, or parts whose text parts carry `text`) rewritten. */
function rewriteContent(content: unknown, rewrite: RewriteText): unknown {
  if (typeof content === 'string') return rewrite(content)
  if (!Array.isArray(content)) return content
  let copy: unknown[] | undefined
  content.forEach((part, index) => {
    if (!isObject(part) || typeof part.text !== 'string') return
    const text = rewrite(part.text)
    if (text !== part.text) (copy ??= [...content])[index] = { ...part, text }
  })
  return copy ?? content
}

/** A field of an object rewritten by `change` (the object itself when unchanged). */
function withField(object: Json, name: string, change: (value: unknown) => unknown): Json {
  const value = object[name]
  if (value === undefined) return object
  const next = change(value)
  return next === value ? object : { ...object, [name]: next }
}

/** A list rewritten item by item (the list itself when no item changed). */
function mapList(list: unknown, change: (item: Json) => Json): unknown {
  if (!Array.isArray(list)) return list
  let copy: unknown[] | undefined
  list.forEach((item, index) => {
    if (!isObject(item)) return
    const next = change(item)
    if (next !== item) (copy ??= [...list])[index] = next
  })
  return copy ?? list
}

function chatMessage(message: Json, rewrite: RewriteText): Json {
  let next = withField(message, 'content', (content) => rewriteContent(content, rewrite))
  next = withField(next, 'tool_calls', (calls) =>
    mapList(calls, (call) => withField(call, 'function', (fn) => (isObject(fn) ? withField(fn, 'arguments', (text) => (typeof text === 'string' ? rewriteArguments(text, rewrite) : text)) : fn))),
  )
  return next
}

function responsesItem(item: Json, rewrite: RewriteText): Json {
  if (item.type === 'function_call') return withField(item, 'arguments', (text) => (typeof text === 'string' ? rewriteArguments(text, rewrite) : text))
  if (item.type === 'function_call_output') return withField(item, 'output', (output) => (typeof output === 'string' ? rewrite(output) : rewriteContent(output, rewrite)))
  return withField(item, 'content', (content) => rewriteContent(content, rewrite))
}

/** The kinds of body a request sends upstream. */
export type BodyForm = 'chat' | 'responses' | 'embeddings'

/** The body with every text it sends rewritten (the body itself when none changed). */
export function rewriteRequestTexts(body: Json, form: BodyForm, rewrite: RewriteText): Json {
  if (form === 'chat') return withField(body, 'messages', (messages) => mapList(messages, (message) => chatMessage(message, rewrite)))
  if (form === 'embeddings') return withField(body, 'input', (input) => (typeof input === 'string' ? rewrite(input) : Array.isArray(input) ? rewriteStrings(input, rewrite) : input))
  let next = withField(body, 'instructions', (text) => (typeof text === 'string' ? rewrite(text) : text))
  next = withField(next, 'input', (input) => (typeof input === 'string' ? rewrite(input) : mapList(input, (item) => responsesItem(item, rewrite))))
  return next
}
