/**
 * The notifications a batch's terminal state causes (SPEC "Batch notifications", "Batch webhook"):
 * outbox rows, built inside the transaction that records the state, so they exist exactly when the
 * state does. A webhook row when the key has a webhook URL; an e-mail row when the key's e-mail
 * notification is on, addressed to its workspace's members (CONTRACT §5 `key notify-email`).
 */
import { randomUUID } from 'node:crypto'
import type { Repositories } from '../storage/repositories'
import type { BatchRow, NewOutboxRow } from '../storage/repositories/batches'
import { webhookBody } from './present'

export interface EmailPayload {
  to: string[]
  subject: string
  text: string
}

export function batchEvent(status: string): string {
  return `batch.${status}`
}

function formatCost(cost: number | null): string {
  return cost === null ? 'not reported' : `$${cost.toFixed(cost < 0.01 && cost > 0 ? 6 : 4)}`
}

export function emailFor(row: BatchRow, to: string[]): EmailPayload {
  const subject = `Batch ${row.status}: ${row.model}, ${row.requestCompleted} of ${row.requestTotal} completed`
  const text = [
    `Your batch ${row.id} is ${row.status}.`,
    '',
    `Model: ${row.model}`,
    `Endpoint: ${row.endpoint}`,
    `Requests: ${row.requestTotal} in total, ${row.requestCompleted} completed, ${row.requestFailed} failed`,
    `Cost: ${formatCost(row.cost)}`,
    '',
    row.status === 'completed' ? `Results: GET /v1/batches/${row.id} with the key that created it (kept 30 days).` : 'This batch has no results.',
  ].join('\n')
  return { to, subject, text }
}

export function notificationsFor(repositories: Pick<Repositories, 'inferenceKeys' | 'workspaces'>, row: BatchRow, nowMs: number): NewOutboxRow[] {
  const key = repositories.inferenceKeys.getById(row.keyId)
  if (!key) return []
  const event = batchEvent(row.status)
  const rows: NewOutboxRow[] = []
  if (key.webhookUrl) {
    rows.push({
      id: `dlv_${randomUUID().replaceAll('-', '')}`,
      kind: 'webhook',
      batchId: row.id,
      keyId: row.keyId,
      event,
      payload: JSON.stringify(webhookBody(row, event, Math.floor(nowMs / 1000))),
      createdAt: nowMs,
    })
  }
  if (key.notifyEmail) {
    const to = repositories.workspaces.listMembers(row.workspaceId).map((member) => member.email)
    if (to.length) {
      rows.push({
        id: `eml_${randomUUID().replaceAll('-', '')}`,
        kind: 'email',
        batchId: row.id,
        keyId: row.keyId,
        event,
        payload: JSON.stringify(emailFor(row, to)),
        createdAt: nowMs,
      })
    }
  }
  return rows
}
