import { accountIn } from '../accounts/accounts.ts'
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
    handler: async (req, app) =>
      ok(await requestTraining(app, req.auth.accountId, req.input?.features), 202),
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
  // The same two for the operator, whose console's Settings trains any account.
  route({
    method: 'POST',
    path: '/admin/v1/accounts/:id/churn-model/train',
    auth: 'admin',
    name: 'train-account-churn-model',
    summary: "Train an account's churn model (a background job)",
    body: TrainBody,
    example: { features: ['plan', 'logins'] },
    refusals: [422],
    reply: { status: 202, body: TrainingStarted },
    handler: async (req, app) =>
      ok(await requestTraining(app, await accountIn(req, app), req.input?.features), 202),
  }),
  route({
    method: 'GET',
    path: '/admin/v1/accounts/:id/churn-model',
    auth: 'admin',
    name: 'get-account-churn-model',
    summary: "An account's churn model: its state, evaluation and features",
    reply: { status: 200, body: ChurnModelState },
    handler: async (req, app) => ok(await readChurnModel(app.sql, await accountIn(req, app))),
  }),
]
