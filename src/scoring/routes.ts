import { accountIn } from '../accounts/accounts.ts'
import { ok, type Route, route } from '../route.ts'
import { ScoreAlertsSchema } from './rules/alerts.ts'
import { ScoringModelSchema } from './rules/model.ts'
import { PreviewBody, previewScores, ScoringPreview } from './preview.ts'
import { getScoreAlerts, getScoringModel, putScoreAlerts, putScoringModel } from './store.ts'

const ACCOUNT = '/admin/v1/accounts/:id'

export const scoringRoutes: Route[] = [
  route({
    method: 'PUT',
    path: `${ACCOUNT}/scoring`,
    auth: 'admin',
    name: 'set-scoring',
    summary: 'Set the scoring model',
    body: ScoringModelSchema,
    reply: { status: 200, body: ScoringModelSchema },
    handler: async (req, app) =>
      ok(await putScoringModel(app.sql, await accountIn(req, app), req.input)),
  }),
  route({
    method: 'GET',
    path: `${ACCOUNT}/scoring`,
    auth: 'admin',
    name: 'get-scoring',
    summary: 'Read the scoring model',
    reply: { status: 200, body: ScoringModelSchema },
    handler: async (req, app) => ok(await getScoringModel(app.sql, await accountIn(req, app))),
  }),
  route({
    method: 'PUT',
    path: `${ACCOUNT}/score-alerts`,
    auth: 'admin',
    name: 'set-score-alerts',
    summary: 'Set which score changes send customer.score_changed ({} turns them off)',
    body: ScoreAlertsSchema,
    example: { churn_risk: { thresholds: [70] }, engagementscore: { delta: 20 } },
    reply: { status: 200, body: ScoreAlertsSchema },
    handler: async (req, app) =>
      ok(await putScoreAlerts(app.sql, await accountIn(req, app), req.input)),
  }),
  route({
    method: 'GET',
    path: `${ACCOUNT}/score-alerts`,
    auth: 'admin',
    name: 'get-score-alerts',
    summary: 'Read the score alerts',
    reply: { status: 200, body: ScoreAlertsSchema },
    handler: async (req, app) => ok(await getScoreAlerts(app.sql, await accountIn(req, app))),
  }),
  route({
    method: 'POST',
    path: `${ACCOUNT}/scoring/preview`,
    auth: 'admin',
    name: 'preview-scoring',
    unaudited: 'read',
    summary:
      "A customer's scores under a model not saved yet, beside its current ones (nothing is written)",
    body: PreviewBody,
    example: {
      external_id: 'acme-1',
      model: { customer: { engagement: [{ codename: 'logins', weight: 100, bad: 0, good: 40 }] } },
    },
    reply: { status: 200, body: ScoringPreview },
    handler: async (req, app) =>
      ok(
        await previewScores(
          app.sql,
          await accountIn(req, app),
          req.input.model,
          req.input.external_id,
        ),
      ),
  }),
]
