/**
 * A key's routing rule as it is stored and read (SPEC "Routing"): its targets in order, its model
 * remaps and its decisioner. The repository writes it, management checks it, the read model holds it
 * and the planner reads it.
 */

export interface StoredTarget {
  providerKeyId: string
  weight: number | null
  ttfbMs: number | null
}

export interface StoredRemap {
  match: string
  percent: number
  providerKeyId: string
  upstreamModel: string
  enabled: boolean
}

export interface StoredRule {
  strategy: 'priority' | 'split'
  targets: StoredTarget[]
  remaps: StoredRemap[]
  decisioner: Record<string, unknown> | null
}
