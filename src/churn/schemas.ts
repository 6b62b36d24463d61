import * as v from 'valibot'
import { describe, int, Probability, Timestamp } from '../validate.ts'

// The request and answers of the churn model's routes (SPEC 13).
export const TrainBody = v.optional(
  v.strictObject({
    features: describe(
      v.optional(
        v.pipe(
          v.array(v.pipe(v.string(), v.minLength(1), v.maxLength(255))),
          v.minLength(1),
          v.maxLength(200),
        ),
      ),
      'The customer properties to learn from (codenames); every attribute and metric when absent.',
    ),
  }),
)

export const TrainingStarted = v.object({ status: v.literal('training'), started_at: Timestamp })

export const ChurnModelState = v.object({
  status: describe(
    v.picklist(['none', 'training', 'ready', 'failed']),
    'failed: the latest training; a model trained before still serves.',
  ),
  started_at: v.optional(Timestamp),
  trained_at: describe(
    v.nullable(Timestamp),
    'When the serving model finished training; null without one.',
  ),
  algorithm: v.nullable(v.picklist(['gradient_boosted_trees', 'logistic_regression'])),
  training: v.nullable(v.object({ customers: int, churned: int, active: int })),
  evaluation: describe(
    v.nullable(
      v.object({
        method: v.string(),
        auc: Probability,
        auc_low: describe(Probability, 'The 95% interval of the AUC (DeLong), low end.'),
        auc_high: Probability,
        brier: Probability,
        calibration: v.array(
          v.object({ predicted: Probability, observed: Probability, customers: int }),
        ),
      }),
    ),
    'Out of sample: every figure is of predictions for customers the model was not trained on (cross-validation).',
  ),
  features: v.array(v.object({ codename: v.string(), importance: Probability })),
  error: describe(v.nullable(v.string()), 'Why the latest training failed.'),
})

const DriverValue = v.union([v.string(), v.number(), v.boolean(), v.null()])
const ChurnDriver = v.object({
  codename: v.string(),
  label: v.string(),
  value: DriverValue,
  contribution: describe(v.number(), 'Its share of the log-odds of churn against the base value.'),
})
export const ChurnDrivers = describe(
  v.nullable(v.object({ up: v.array(ChurnDriver), down: v.array(ChurnDriver) })),
  'What raises (up) and lowers (down) the churn probability most, at most 3 each; null without a model.',
)
