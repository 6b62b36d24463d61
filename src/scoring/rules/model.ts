import * as v from 'valibot'
import type { Entity, PropertyDef, PropertyType } from '../../property.ts'
import type { FieldError } from '../../errors.ts'
import { closest, storable } from '../../validate.ts'

// Bounds beyond the documented model's: sql.ts scores in float8, where PostgreSQL raises an
// error on overflow and underflow instead of giving Infinity or 0. With these no intermediate
// result of the score can leave float8's range (whatever the stored values), and no meaningful
// model is refused.
const notTiny = (x: number) => x === 0 || Math.abs(x) >= 1e-6
const Score = v.pipe(
  v.number(),
  v.minValue(-100),
  v.maxValue(100),
  v.check(notTiny, 'A score must be 0 or at least 0.000001 in magnitude.'),
  // The check as the document states it: no number strictly between -1e-6 and 1e-6 but 0.
  v.metadata({ not: { exclusiveMinimum: -1e-6, exclusiveMaximum: 1e-6, not: { const: 0 } } }),
)
const Bound = v.pipe(v.number(), v.minValue(-1e15), v.maxValue(1e15))
const WEIGHT = 'A weight must be between 0.000001 and 1000000.'

const ruleBase = {
  codename: v.pipe(v.string(), v.nonEmpty('A codename must not be empty.')),
  weight: v.pipe(v.number(), v.minValue(1e-6, WEIGHT), v.maxValue(1e6, WEIGHT)),
}

// Strict objects so that a rule mixing two forms (e.g. `values` next to `bad`) is refused rather
// than scored by whichever form happens to match.
const FORMS =
  'A rule is an object with `codename` and `weight` plus either numeric `bad` and `good`, ' +
  'a boolean `good`, or a `values` map with an optional `default`.'
const RULE_KEYS = ['codename', 'weight', 'bad', 'good', 'values', 'default']
// An unknown key's message follows "Unknown key <path>" (validate.ts), as strict()'s does.
const formsMessage = (issue: v.StrictObjectIssue) => {
  if (issue.expected !== 'never') return FORMS
  const meant = closest(String(issue.input), RULE_KEYS)
  return `${meant ? ` (did you mean ${meant}?)` : ''}: ${FORMS.replace('A rule', 'a rule')}`
}
const RangeRuleSchema = v.pipe(
  v.strictObject({ ...ruleBase, bad: Bound, good: Bound }, formsMessage),
  v.forward(
    v.check((r) => r.bad !== r.good, '`good` must differ from `bad`.'),
    ['good'],
  ),
)
const BooleanRuleSchema = v.strictObject({ ...ruleBase, good: v.boolean() }, formsMessage)
const ValuesRuleSchema = v.strictObject(
  // The values are stored with the model (jsonb): a key must be storable text, as every name kept.
  {
    ...ruleBase,
    values: v.record(v.pipe(v.string(), storable), Score),
    default: v.optional(Score),
  },
  formsMessage,
)

export type RangeRule = v.InferOutput<typeof RangeRuleSchema>
type BooleanRule = v.InferOutput<typeof BooleanRuleSchema>
type ValuesRule = v.InferOutput<typeof ValuesRuleSchema>
export type Rule = RangeRule | BooleanRule | ValuesRule

// The form is picked from the keys present, so a broken rule is reported against the form it
// was meant to be (e.g. "/good: expected number") instead of as an opaque union mismatch.
const formOf = (input: unknown) => {
  const o = (typeof input === 'object' && input !== null ? input : {}) as Record<string, unknown>
  if ('values' in o || 'default' in o) return ValuesRuleSchema
  if (typeof o.good === 'boolean') return BooleanRuleSchema
  return RangeRuleSchema
}

const RuleSchema: v.GenericSchema<unknown, Rule> = v.pipe(
  v.lazy(formOf),
  v.metadata({ published: { oneOf: [RangeRuleSchema, BooleanRuleSchema, ValuesRuleSchema] } }),
)
const Rules = v.array(RuleSchema)
const INACTIVE_DAYS = '`inactive_days` must be a positive integer.'

export const ScoringModelSchema = v.strictObject({
  customer: v.optional(v.strictObject({ engagement: v.optional(Rules), fit: v.optional(Rules) })),
  contact: v.optional(v.strictObject({ engagement: v.optional(Rules) })),
  churn: v.optional(
    v.strictObject({
      inactive_days: v.optional(
        v.pipe(v.number(), v.integer(INACTIVE_DAYS), v.minValue(1, INACTIVE_DAYS)),
      ),
    }),
  ),
})

export type ScoringModel = v.InferOutput<typeof ScoringModelSchema>

// Customer uploads are refused (490) without a customer model, so an empty one must not count.
export const hasCustomerModel = (model: ScoringModel | null | undefined): boolean =>
  (model?.customer?.engagement?.length ?? 0) + (model?.customer?.fit?.length ?? 0) > 0

// Rules only name defined properties (checkModelAgainstProperties); a codename defined nowhere
// reads as a number attribute, which scores nothing unless a number is stored under it.
export const propertyLookup = (defs: readonly PropertyDef[]) => {
  const byCodename = new Map(defs.map((d) => [d.codename, d]))
  return {
    typeOf: (codename: string): PropertyType => byCodename.get(codename)?.type ?? 'number',
    isMetric: (codename: string) => byCodename.get(codename)?.kind === 'metric',
  }
}

const isRangeRule = (rule: Rule): rule is RangeRule => 'bad' in rule
export const isBooleanRule = (rule: Rule): rule is BooleanRule =>
  'good' in rule && typeof rule.good === 'boolean'
export const isValuesRule = (rule: Rule): rule is ValuesRule => 'values' in rule

const hasFormFor = (rule: Rule, type: PropertyType) =>
  type === 'boolean'
    ? isBooleanRule(rule)
    : type === 'string'
      ? isValuesRule(rule)
      : isRangeRule(rule)

const expectedForm: Record<PropertyType, string> = {
  number: 'numeric `bad` and `good`',
  date: 'numeric `bad` and `good` (days from the scoring date)',
  boolean: 'a boolean `good`',
  string: 'a `values` map',
}

type Catalogs = Record<Entity, readonly PropertyDef[]>

const checkRules = (
  rules: Rule[] | undefined,
  entity: Entity,
  base: string,
  catalogs: Catalogs,
): FieldError[] =>
  (rules ?? []).flatMap((rule, i) => {
    const def = catalogs[entity].find((d) => d.codename === rule.codename)
    if (!def)
      return [
        {
          path: `${base}/${i}/codename`,
          message: `No ${entity} property "${rule.codename}" is defined.`,
        },
      ]
    if (hasFormFor(rule, def.type)) return []
    return [
      {
        path: `${base}/${i}`,
        message: `"${rule.codename}" is a ${def.type} property: its rule needs ${expectedForm[def.type]}.`,
      },
    ]
  })

export const checkModelAgainstProperties = (
  model: ScoringModel,
  catalogs: Catalogs,
): FieldError[] => [
  ...checkRules(model.customer?.engagement, 'customer', '/customer/engagement', catalogs),
  ...checkRules(model.customer?.fit, 'customer', '/customer/fit', catalogs),
  ...checkRules(model.contact?.engagement, 'contact', '/contact/engagement', catalogs),
]
