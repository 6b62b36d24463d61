import type { Route } from '../route.ts'
import { accountRoutes } from '../accounts/routes.ts'
import { auditRoutes } from '../audit/routes.ts'
import { backupRoutes } from '../backups/routes.ts'
import { catalogRoutes } from '../catalog/routes.ts'
import { churnRoutes } from '../churn/routes.ts'
import { insightRoutes } from '../insights/routes.ts'
import { peopleRoutes, userRoutes } from '../people/routes.ts'
import { notificationRoutes } from '../notifications/routes.ts'
import { privacyRoutes } from '../privacy/routes.ts'
import { recordRoutes, searchRoutes } from '../records/routes.ts'
import { scoringRoutes } from '../scoring/routes.ts'
import { segmentRoutes } from '../segments/routes.ts'
import { relayRoutes, suppressionRoutes, trackingRoutes } from '../tracking/routes.ts'
import { uploadRoutes } from '../uploads/routes.ts'
import { webhookRoutes } from '../webhooks/routes.ts'
import { consoleRoutes } from './console.ts'
import { docsRoutes } from './docs.ts'
import { healthRoutes } from './health.ts'
import { metricsRoute } from './metrics.ts'
import { openApiRoute } from './openapi.ts'

// The whole routing table: the router, the OpenAPI document, the admin CLI and the tests read it.
// Interface endpoints accept only POST; the router answers 405 with Allow for any other method on
// their paths.
export const routes: Route[] = [
  ...searchRoutes,
  ...uploadRoutes,
  ...trackingRoutes,
  ...relayRoutes,
  ...segmentRoutes,
  ...insightRoutes,
  ...churnRoutes,
  ...recordRoutes,
  ...accountRoutes,
  ...userRoutes,
  ...catalogRoutes,
  ...scoringRoutes,
  ...webhookRoutes,
  ...notificationRoutes,
  ...backupRoutes,
  ...healthRoutes,
  metricsRoute,
  ...docsRoutes,
  ...consoleRoutes,
  // Last but the document: the rows before them keep their places (test/openapi-fuzz.test.ts
  // seeds by place).
  ...privacyRoutes,
  ...suppressionRoutes,
  ...auditRoutes,
  ...peopleRoutes,
  openApiRoute(() => routes),
]
