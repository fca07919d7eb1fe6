/** Inputs several operations share, their MCP schemas, and the checks that read them from a tool's arguments. */
import { Type } from '@sinclair/typebox'
import { badRequest } from '../errors'

export interface IdInput {
  id: string
}
export interface IdBody {
  id: string
  body: Record<string, unknown>
}

export const idSchema = (description: string) => Type.Object({ id: Type.String({ description }) })
export const keyIdSchema = Type.Object({ key_id: Type.String({ description: 'Inference key UUID.' }) })

export function requireString(input: Record<string, unknown>, name: string): string {
  const value = input[name]
  if (typeof value !== 'string' || value === '') throw badRequest(`Invalid ${name}: required string.`)
  return value
}

export function withoutKeys(input: Record<string, unknown>, ...names: string[]): Record<string, unknown> {
  const copy = { ...input }
  for (const name of names) delete copy[name]
  return copy
}
