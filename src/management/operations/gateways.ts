/** The gateway operations: the catalog (API), and the operator's platform-wide switch and description. */
import { Type } from '@sinclair/typebox'
import { describeGateway, gatewayCatalog, publicGatewayEntry } from '../../gateways/catalog'
import { requireGateway } from '../providers'
import { GatewayOutput } from '../schemas'
import { unauthorized } from './error-statuses'
import type { Operation } from './operation'

export const gatewaysList = {
  name: 'gateways.list',
  access: 'read',
  run: () => gatewayCatalog.map(publicGatewayEntry),
  rest: { method: 'GET', path: '/gateways', tags: ['gateways'], summary: 'Gateway catalog', output: { schema: Type.Array(GatewayOutput), description: 'The gateway catalog.' }, errors: unauthorized, input: () => ({}) },
  mcp: {
    tool: 'list_gateways',
    description: 'List the gateway catalog: slugs to use as `gateway` when storing a provider key, with capabilities.',
    input: Type.Object({}),
    from: () => ({}),
  },
} satisfies Operation<Record<string, never>>

export const gatewaysSet = {
  name: 'gateways.set',
  access: 'write',
  run: (deps, _actor, input: { gateway: string; enabled: boolean }) => {
    const gateway = requireGateway(input.gateway)
    const row = deps.repositories.providerKeys.setGatewayEnabled(gateway.id, input.enabled, deps.now().toISOString())
    return { gateway: row.gateway, enabled: row.enabled, updated_at: row.updatedAt }
  },
  // A platform-wide switch: no workspace's (the operator's record, in no workspace's log).
  audit: (input) => ({ target: { type: 'gateway', id: input.gateway }, changes: { enabled: input.enabled }, workspaceId: '' }),
} satisfies Operation<{ gateway: string; enabled: boolean }>

export const gatewaysDescribe = {
  name: 'gateways.describe',
  access: 'read',
  run: (deps) => ({ gateways: gatewayCatalog.map((gateway) => describeGateway(gateway, deps.config.gatewayUrlOverrides)) }),
} satisfies Operation<Record<string, never>>
