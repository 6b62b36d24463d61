import { ok, type Route, route } from '../route.ts'
import { ChurnModelState, TrainBody, TrainingStarted } from './schemas.ts'
import { readChurnModel, requestTraining } from './train.ts'

export const churnRoutes: Route[] = [
  route({
    method: 'POST',
    path: '/api/v1/churn-model/train',
    auth: { key: 'upload' },
    name: 'train-churn-model',
    tag: 'insights',
    summary: "Train the account's churn model on its own customers (a background job)",
    body: TrainBody,
    example: { features: ['plan', 'logins'] },
    refusals: [422],
    reply: { status: 202, body: TrainingStarted },
    handler: async (req, app) => ok(await requestTraining(app, req.auth.accountId, req.input?.features), 202),
  }),
  route({
    method: 'GET',
    path: '/api/v1/churn-model',
    auth: { key: 'search' },
    name: 'get-churn-model',
    tag: 'insights',
    summary: "The account's churn model: its state, evaluation and features",
    reply: { status: 200, body: ChurnModelState },
    handler: async (req, app) => ok(await readChurnModel(app.sql, req.auth.accountId)),
  }),
]
