/**
 * The 21 gateway kinds (CONTRACT §6), in proxy registration order. Differences
 * between gateways are data here; an adapter file exists only for what data cannot say.
 */
import type { GatewayDefinition, Prefill, ResponsesSupport } from '../domain/gateway-definition'

// The definition's shape is plain data on the floor (domain/gateway-definition.ts), beside the read model's provider entries.
export type { GatewayConfigField, GatewayDefinition, Prefill, ResponsesSupport } from '../domain/gateway-definition'

const chatGateway = {
  chat: true,
  embeddings: false,
  responses: 'native' as ResponsesSupport,
  chain: false,
  retrieve: false,
  batch: false,
  decisioner: false,
  omitParams: [] as readonly string[],
  prefill: false as Prefill,
  moderations: false,
}

export const gatewayCatalog = [
  {
    id: 'openai',
    name: 'OpenAI',
    baseUrl: 'https://api.openai.com/v1',
    authHeader: 'authorization',
    routable: true,
    decisions: true,
    capabilities: { ...chatGateway, embeddings: true, chain: true, retrieve: true, decisioner: true, moderations: true },
  },
  {
    id: 'openrouter',
    name: 'OpenRouter',
    baseUrl: 'https://openrouter.ai/api/v1',
    authHeader: 'authorization',
    routable: true,
    decisions: true,
    capabilities: { ...chatGateway, embeddings: true, batch: true, decisioner: true, prefill: 'trailing' as const },
  },
  {
    id: 'vercel-ai-gateway',
    name: 'Vercel AI Gateway',
    baseUrl: 'https://ai-gateway.vercel.sh/v1',
    authHeader: 'authorization',
    routable: true,
    decisions: true,
    capabilities: { ...chatGateway, embeddings: true, decisioner: true },
  },
  {
    id: 'cloudflare-ai-gateway',
    name: 'Cloudflare AI Gateway',
    baseUrl: 'https://gateway.ai.cloudflare.com/v1/{account_id}/{gateway_id}/compat',
    authHeader: 'authorization',
    routable: true,
    decisions: false,
    capabilities: { ...chatGateway },
    configFields: [
      { name: 'account_id', required: true },
      { name: 'gateway_id', required: false, default: 'default' },
    ],
  },
  {
    id: 'portkey',
    name: 'Portkey',
    baseUrl: 'https://api.portkey.ai/v1',
    authHeader: 'x-portkey-api-key',
    routable: true,
    decisions: false,
    capabilities: { ...chatGateway, chain: true },
  },
  {
    id: 'litellm',
    name: 'LiteLLM Proxy (self-hosted)',
    baseUrl: 'http://localhost:4000/v1',
    authHeader: 'authorization',
    routable: true,
    decisions: false,
    capabilities: { ...chatGateway, chain: true },
  },
  {
    id: 'requesty',
    name: 'Requesty',
    baseUrl: 'https://router.requesty.ai/v1',
    authHeader: 'authorization',
    routable: true,
    decisions: false,
    capabilities: { ...chatGateway },
  },
  {
    id: 'helicone',
    name: 'Helicone AI Gateway',
    baseUrl: 'https://ai-gateway.helicone.ai/v1',
    authHeader: 'authorization',
    routable: true,
    decisions: false,
    capabilities: { ...chatGateway },
  },
  {
    id: 'together',
    name: 'Together AI',
    baseUrl: 'https://api.together.xyz/v1',
    authHeader: 'authorization',
    routable: true,
    decisions: true,
    capabilities: { ...chatGateway, embeddings: true },
  },
  {
    id: 'fireworks',
    name: 'Fireworks AI',
    baseUrl: 'https://api.fireworks.ai/inference/v1',
    authHeader: 'authorization',
    routable: true,
    decisions: true,
    capabilities: { ...chatGateway, embeddings: true },
  },
  {
    id: 'groq',
    name: 'Groq',
    baseUrl: 'https://api.groq.com/openai/v1',
    authHeader: 'authorization',
    routable: true,
    decisions: true,
    capabilities: { ...chatGateway, prefill: 'trailing' as const },
  },
  {
    id: 'deepinfra',
    name: 'DeepInfra',
    baseUrl: 'https://api.deepinfra.com/v1/openai',
    authHeader: 'authorization',
    routable: true,
    decisions: false,
    capabilities: { ...chatGateway, embeddings: true },
  },
  {
    id: 'mistral',
    name: 'Mistral AI',
    baseUrl: 'https://api.mistral.ai/v1',
    authHeader: 'authorization',
    routable: true,
    decisions: false,
    capabilities: { ...chatGateway, embeddings: true, prefill: 'prefix' as const, moderations: true },
  },
  {
    id: 'xai',
    name: 'xAI',
    baseUrl: 'https://api.x.ai/v1',
    authHeader: 'authorization',
    routable: true,
    decisions: false,
    capabilities: { ...chatGateway, chain: true },
  },
  {
    id: 'deepseek',
    name: 'DeepSeek',
    baseUrl: 'https://api.deepseek.com/v1',
    authHeader: 'authorization',
    routable: true,
    decisions: false,
    // DeepSeek has no Responses endpoint: Responses requests are translated to chat.
    capabilities: { ...chatGateway, responses: 'translated' as const },
  },
  {
    id: 'cerebras',
    name: 'Cerebras',
    baseUrl: 'https://api.cerebras.ai/v1',
    authHeader: 'authorization',
    routable: true,
    decisions: false,
    capabilities: { ...chatGateway },
  },
  {
    id: 'sambanova',
    name: 'SambaNova Cloud',
    baseUrl: 'https://api.sambanova.ai/v1',
    authHeader: 'authorization',
    routable: true,
    decisions: false,
    capabilities: { ...chatGateway },
  },
  {
    id: 'perplexity',
    name: 'Perplexity',
    baseUrl: 'https://api.perplexity.ai',
    authHeader: 'authorization',
    routable: true,
    decisions: false,
    // The rejected-parameter quirk of SPEC "POST /chat/completions": top_p is left out here.
    capabilities: { ...chatGateway, omitParams: ['top_p'] },
  },
  {
    id: 'openai-responses',
    name: 'OpenAI Responses-only models',
    baseUrl: 'https://api.openai.com/v1',
    authHeader: 'authorization',
    routable: true,
    decisions: false,
    // Models such as o3-pro and codex are served only on /responses: chat is converted to it.
    capabilities: { ...chatGateway, responses: 'only' as const, chain: true, retrieve: true },
  },
  {
    id: 'not-diamond',
    name: 'Not Diamond',
    baseUrl: 'https://api.notdiamond.ai/v2',
    authHeader: 'authorization',
    routable: false,
    decisions: true,
    capabilities: { ...chatGateway, chat: false, decisioner: true },
  },
  {
    id: 'martian',
    name: 'Martian',
    baseUrl: 'https://api.withmartian.com/v1',
    authHeader: 'authorization',
    routable: false,
    decisions: true,
    capabilities: { ...chatGateway, chat: false, decisioner: true },
  },
] as const satisfies readonly GatewayDefinition[]

export type GatewayId = (typeof gatewayCatalog)[number]['id']

const byId = new Map<string, GatewayDefinition>(gatewayCatalog.map((gateway) => [gateway.id, gateway]))

export function findGateway(id: string): GatewayDefinition | undefined {
  return byId.get(id)
}

/** `RT_GATEWAY_URL_<SLUG>`: upper case, every non-alphanumeric character as `_`. */
export function gatewayOverrideSlug(id: string): string {
  return id.toUpperCase().replace(/[^A-Z0-9]/g, '_')
}

export function resolveBaseUrl(gateway: GatewayDefinition, overrides: Readonly<Record<string, string>>): string {
  return overrides[gatewayOverrideSlug(gateway.id)] ?? gateway.baseUrl
}

/** The base URL for one provider key: placeholders such as `{account_id}` come from its config. */
export function providerBaseUrl(gateway: GatewayDefinition, overrides: Readonly<Record<string, string>>, config: Record<string, unknown>): string {
  return resolveBaseUrl(gateway, overrides).replace(/\{(\w+)\}/g, (_, name: string) => encodeURIComponent(String(config[name] ?? '')))
}

/** The catalog entry as the API and the CLI show it (SPEC "Gateway catalog entry", CONTRACT §6). */
export function describeGateway(gateway: GatewayDefinition, overrides: Readonly<Record<string, string>>) {
  return {
    id: gateway.id,
    name: gateway.name,
    routable: gateway.routable,
    decisions: gateway.decisions,
    ...(gateway.configFields ? { config_fields: gateway.configFields.map((field) => ({ ...field })) } : {}),
    base_url: resolveBaseUrl(gateway, overrides),
    auth_header: gateway.authHeader,
    capabilities: {
      chat: gateway.capabilities.chat,
      embeddings: gateway.capabilities.embeddings,
      responses: gateway.capabilities.responses,
      chain: gateway.capabilities.chain,
      retrieve: gateway.capabilities.retrieve,
      batch: gateway.capabilities.batch,
      decisioner: gateway.capabilities.decisioner,
      omit_params: [...gateway.capabilities.omitParams],
    },
  }
}

/** The entry the management API and MCP show: the operator's base URLs (overrides may name internal hosts) stay out. */
export function publicGatewayEntry(gateway: GatewayDefinition) {
  const { base_url: _baseUrl, ...entry } = describeGateway(gateway, {})
  return entry
}
