/**
 * POST /v1/decisions in the OpenAPI document (CONTRACT §9): the one inference path documented there,
 * since SPEC.md leaves its fields to this service. Served by the inference pipeline, not by Elysia,
 * so it is written out here.
 */
const question = {
  type: 'object',
  required: ['id', 'type', 'prompt'],
  properties: {
    id: { type: 'string', minLength: 1, maxLength: 64, description: 'Unique within the request.' },
    type: { type: 'string', enum: ['choice', 'boolean', 'number'] },
    prompt: { type: 'string', minLength: 1 },
    options: { type: 'array', items: { type: 'string' }, minItems: 2, maxItems: 32, uniqueItems: true, description: 'choice only: 2 to 32 unique options.' },
    min: { type: 'number', description: 'number only, optional.' },
    max: { type: 'number', description: 'number only, optional.' },
  },
}

const answer = {
  type: 'object',
  required: ['id', 'type', 'answer'],
  properties: {
    id: { type: 'string' },
    type: { type: 'string', enum: ['choice', 'boolean', 'number'] },
    answer: { description: 'choice: one of the options; boolean: true or false; number: a number.' },
    probabilities: { type: 'object', additionalProperties: { type: 'number', minimum: 0, maximum: 1 }, description: 'choice: each option\'s probability; they sum to 1 ± 0.01.' },
    probability: { type: 'number', minimum: 0, maximum: 1, description: 'boolean: P(true).' },
    interval: { type: 'array', items: { type: 'number' }, minItems: 2, maxItems: 2, description: 'number: [low, high].' },
  },
}

const error = {
  type: 'object',
  properties: { error: { type: 'object', properties: { message: { type: 'string' }, type: { type: 'string' }, code: { type: 'string' } } } },
}

export const decisionsPath = {
  '/v1/decisions': {
    post: {
      tags: ['Inference'],
      summary: 'Answer typed questions with calibrated probabilities (keys of shape decisions)',
      description:
        'Routed with failover over the key\'s decision-capable targets like chat; each gateway\'s answer is checked (one answer per question, in order; choice probabilities summing to 1 ± 0.01) and relayed as it came. A bad body is 400 invalid_decision_request naming the field, and nothing is sent.',
      security: [{ inferenceKey: [] }],
      requestBody: {
        required: true,
        content: {
          'application/json': {
            schema: {
              type: 'object',
              required: ['model', 'state', 'questions'],
              properties: {
                model: { type: 'string', minLength: 1, maxLength: 256 },
                state: { description: 'Any JSON value: what the questions are about.' },
                questions: { type: 'array', minItems: 1, maxItems: 16, items: question },
              },
            },
          },
        },
      },
      responses: {
        '200': {
          description: 'The decision.',
          content: {
            'application/json': {
              schema: {
                type: 'object',
                required: ['id', 'object', 'model', 'created', 'answers'],
                properties: {
                  id: { type: 'string' },
                  object: { type: 'string', enum: ['decision'] },
                  model: { type: 'string' },
                  created: { type: 'integer' },
                  answers: { type: 'array', items: answer },
                  usage: { type: 'object', additionalProperties: true },
                },
              },
            },
          },
        },
        '400': { description: 'invalid_decision_request (the field is named in the message).', content: { 'application/json': { schema: error } } },
        '401': { description: 'invalid_api_key or revoked_api_key.', content: { 'application/json': { schema: error } } },
        '404': { description: 'wrong_api_shape: the key is not of shape decisions.', content: { 'application/json': { schema: error } } },
        '502': { description: 'Every target failed, or answered with something that is not a decision (upstream_unreadable).', content: { 'application/json': { schema: error } } },
      },
    },
  },
}
