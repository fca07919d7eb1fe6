/** The types shared by the inference pipeline's stages. */
import type { KeyLimiter } from './limits/ledger'
import type { RouterTracing } from '../observability/tracing'
import type { Config } from '../config/env'
import type { Envelope } from '../errors/render'
import type { Logger } from '../observability/logger'
import type { Metrics } from '../observability/metrics'
import type { SnapshotStore } from './read-model/entries'
import type { Repositories } from '../storage/repositories'
import type { AuthenticatedContext } from './request/context'
import type { RequestLogQueue } from './log/log-request'
import type { McpServers } from './stages/mcp-servers'
import type { UpstreamClient } from '../gateways/client'
import type { CacheStore } from '../storage/cache-store'

export interface InferenceDeps {
  config: Config
  snapshots: SnapshotStore
  logQueue: RequestLogQueue
  metrics: Metrics
  logger: Logger
  /** Plug-in service calls (companion ads, keyterm links). */
  fetch: typeof fetch
  /** Every call to a gateway. */
  upstream: UpstreamClient
  random: () => number
  /** Signs ids the service issues (resp_rt_…, batch_rt_…). */
  sign: (text: string) => string
  /** Batch rows and what a batch's notifications need (the Batch API only; the hot path reads none). */
  repositories: Repositories
  /** MCP servers attached to keys (the MCP tools stage). */
  mcpServers: McpServers
  /** Admission against keys' limits (pipeline/limits); only limited keys reach it. */
  limiter: KeyLimiter
  /** OpenTelemetry traces (CONTRACT §13); undefined when no OTLP endpoint is set. */
  tracing?: RouterTracing
  /** This node's response cache (CONTRACT §15): its store, opened when a key with a cache first uses it. */
  cache?: { open(): CacheStore }
}

export type InferenceEndpoint =
  | 'chat'
  | 'embeddings'
  | 'models'
  | 'model'
  | 'messages'
  | 'count_tokens'
  | 'generate_content'
  | 'stream_generate_content'
  | 'responses'
  | 'responses_get'
  | 'decisions'
  | 'batches'

export interface InferenceRoute {
  endpoint: InferenceEndpoint
  /** Key shapes this endpoint belongs to; any other shape gets 404 wrong_api_shape. */
  shapes: readonly string[]
  /** Envelope before the key is known (by path dialect). */
  envelope: Envelope
  /** Path parameter: a model id or response id. */
  parameter?: string
}

export type EndpointHandler = (context: AuthenticatedContext, request: Request, route: InferenceRoute, deps: InferenceDeps) => Promise<Response>

