/** The management REST API at /api/v1 (SPEC "Management API"): thin routes over management/. */
import { Elysia, type AnyElysia } from 'elysia'
import { readBodyWithin } from '../../http/read-body'
import { Type, type TSchema } from '@sinclair/typebox'
import type { AppDeps } from '../deps'
import { managementAuth } from './auth'
import { ManagementError } from '../../management/errors'
import { errorOutput } from '../../management/schemas'
import { operationList } from '../../management/operations'
import type { Caller } from '../../management/operations/operation'
import { perform } from '../../management/perform'
import type { Actor } from '../../management/context'
import { callerAddress } from '../../pipeline/request/authenticate'
import { peerAddress } from '../peer-address'

const data = <T>(value: T) => ({ data: value })

/** The `{data: …}` envelope of a success; the description becomes the response's in the OpenAPI document. */
function envelope(schema: Parameters<typeof Type.Object>[0]['data'], description: string) {
  return Type.Object({ data: schema }, { description })
}

/**
 * Bodies go through readManagementJson (the size limit, SPEC's messages). It always returns or throws,
 * so the second entry never parses: it names the media type, which the OpenAPI document reads from here.
 */
const jsonBody = (): ('managementJson' | 'application/json')[] => ['managementJson', 'application/json']

export const managementBodyLimit = 1_000_000

/** Management bodies: JSON of at most 1 MB, counted as read (a chunked body has no length header). */
export async function readManagementJson({ request }: { request: Request }): Promise<unknown> {
  if (!request.body) throw new ManagementError(400, 'Request body must be a JSON object.')
  const bytes = await readBodyWithin(request, managementBodyLimit)
  if (bytes === undefined) throw new ManagementError(400, `Request body too large: the limit is ${managementBodyLimit} bytes.`)
  try {
    return JSON.parse(new TextDecoder().decode(bytes))
  } catch {
    throw new ManagementError(400, 'Malformed JSON body.')
  }
}

/** The caller of a management request: its actor, the door, its address (RT_TRUST_PROXY) and a request id. */
export function managementCaller(deps: Pick<AppDeps, 'config'>, actor: Actor, via: Caller['via'], request: Request): Caller {
  return { actor, via, ip: callerAddress(request.headers, () => peerAddress(request), deps.config.trustProxy), requestId: crypto.randomUUID() }
}

/** The REST API: one route per operation of the table that has one, with its OpenAPI description. */
export function adminRoutes(deps: AppDeps) {
  // normalize: false — a body is validated as sent, never reshaped (an array is not an object).
  let routes: AnyElysia = new Elysia({ prefix: '/api/v1', name: 'admin', normalize: false }).parser('managementJson', readManagementJson).use(managementAuth(deps))
  for (const operation of operationList) {
    const rest = operation.rest
    if (!rest) continue
    const errors: Record<number, TSchema> = {}
    for (const [status, description] of Object.entries(rest.errors)) errors[Number(status)] = errorOutput(description)
    const success = rest.bare ? Type.Composite([rest.output.schema], { description: rest.output.description }) : envelope(rest.output.schema, rest.output.description)
    const options = {
      ...(rest.body ? { parse: jsonBody(), body: rest.body } : {}),
      ...(rest.query ? { query: rest.query } : {}),
      detail: { tags: rest.tags, summary: rest.summary, ...(rest.parameters ? { parameters: rest.parameters } : {}) },
      response: { [rest.status ?? 200]: success, ...errors },
    }
    const handler = async (context: { actor: Actor; params: Record<string, string>; body: unknown; request: Request; set: { status?: number | string } }) => {
      const input = rest.input({ params: context.params, body: context.body, query: new URL(context.request.url).searchParams })
      const output = await perform(deps, managementCaller(deps, context.actor, 'rest', context.request), operation, input)
      if (rest.status) context.set.status = rest.status
      return rest.bare ? output : data(output)
    }
    const method = rest.method.toLowerCase() as 'get' | 'post' | 'patch' | 'put' | 'delete'
    routes = (routes as any)[method](rest.path, handler, options)
  }
  return routes
}
