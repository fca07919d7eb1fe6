/**
 * Body capture (SPEC "Request log"): a workspace that captures request bodies keeps each request's
 * body in its request-log row (RT_BODY_RETENTION_DAYS, CONTRACT §14). Set on the key's compiled
 * chain when its entry is built; the row reads it when the request finishes.
 */
import type { Stage } from './stage'

export const bodyCaptureStage: Stage = {
  name: 'body-capture',
  appliesTo: (key) => key.workspace?.captureBodies === true,
  settings: () => ({ captureBodies: true }),
}
