import { html } from 'htm/preact'
import { useEffect, useState } from 'preact/hooks'
import {
  type ChurnModelState,
  type Door,
  labelOf,
  type Property,
  through,
  type TrainingStarted,
} from './api.ts'
import { Empty, Failed, Loading, percent, When } from './format.ts'
import { useAction, useData } from './load.ts'
import { Scroller } from './scroller.ts'

type Calibration = NonNullable<ChurnModelState['evaluation']>['calibration']

const SIZE = 200
const PAD = 28
const FEATURES_SHOWN = 10
// A training runs as a job; the page asks again every few seconds, a bounded number of times, and
// then leaves it to the reload button rather than polling forever.
const POLL_MS = 2000
const POLLS = 30

// Predicted against observed churn per bin, on the diagonal when calibrated; each dot's area is its
// customers. The table below holds the same numbers for screen readers.
const CalibrationChart = ({ bins }: { bins: Calibration }) => {
  const at = (p: number) => PAD + p * (SIZE - 2 * PAD)
  const most = Math.max(1, ...bins.map((b) => b.customers))
  const said = bins
    .map((b) => `${percent(b.predicted)} predicted, ${percent(b.observed)} observed`)
    .join('; ')
  return html`<svg class="calibration" viewBox=${`0 0 ${SIZE} ${SIZE}`} width=${SIZE} height=${SIZE} role="img"
    aria-label=${`Calibration: ${said}`} data-bins=${bins.length}>
    <line x1=${at(0)} y1=${SIZE - at(0)} x2=${at(1)} y2=${SIZE - at(1)} class="grid" />
    <line x1=${at(0)} y1=${SIZE - at(0)} x2=${at(1)} y2=${SIZE - at(0)} class="axis" />
    <line x1=${at(0)} y1=${SIZE - at(0)} x2=${at(0)} y2=${SIZE - at(1)} class="axis" />
    ${bins.map(
      (b) => html`<circle cx=${at(b.predicted)} cy=${SIZE - at(b.observed)}
        r=${2 + 5 * Math.sqrt(b.customers / most)} class="dot"><title>${percent(b.predicted)} predicted,
        ${percent(b.observed)} observed, ${b.customers}</title></circle>`,
    )}
    <text x=${SIZE / 2} y=${SIZE - 6} text-anchor="middle">predicted</text>
    <text x="10" y=${SIZE / 2} text-anchor="middle" transform=${`rotate(-90 10 ${SIZE / 2})`}>observed</text>
  </svg>`
}

const fixed = (n: number) => n.toFixed(3)

const Evaluation = ({ model, properties }: { model: ChurnModelState; properties?: Property[] }) => {
  const e = model.evaluation
  if (!e) return html`<${Empty}>No model trained.</${Empty}>`
  return html`<dl class="churn-evaluation" id="churn-evaluation">
      <div>
        <dt>AUC</dt>
        <dd id="churn-auc">${fixed(e.auc)} (95% interval ${fixed(e.auc_low)}–${fixed(e.auc_high)})</dd>
      </div>
      <div><dt>Brier score</dt><dd id="churn-brier">${fixed(e.brier)}</dd></div>
      <div><dt>Algorithm</dt><dd>${model.algorithm?.replaceAll('_', ' ') ?? '–'}</dd></div>
      <div><dt>Trained</dt><dd><${When} at=${model.trained_at} /></dd></div>
      ${
        model.training &&
        html`<div><dt>Trained on</dt>
          <dd>${model.training.customers} customers (${model.training.churned} churned)</dd></div>`
      }
    </dl>
    <p class="muted">${e.method}</p>
    <div class="columns">
      <div>
        <h3>Calibration</h3>
        <${CalibrationChart} bins=${e.calibration} />
        <${Scroller} label="Calibration"><table id="churn-calibration">
          <thead><tr>
            <th scope="col">Predicted</th><th scope="col">Observed</th><th scope="col">Customers</th>
          </tr></thead>
          <tbody>${e.calibration.map(
            (
              b,
            ) => html`<tr><td class="num">${percent(b.predicted)}</td><td class="num">${percent(b.observed)}</td>
              <td class="num">${b.customers}</td></tr>`,
          )}</tbody>
        </table></${Scroller}>
      </div>
      <div>
        <h3>Top features</h3>
        <ol id="churn-features">${model.features
          .slice(0, FEATURES_SHOWN)
          .map(
            (f) =>
              html`<li data-codename=${f.codename}>${labelOf(properties, f.codename)} (${fixed(f.importance)})</li>`,
          )}</ol>
      </div>
    </div>`
}

// The account's learned churn model in Settings, for the operator and for the account's
// admin alike.
export const ChurnModelSettings = ({
  door,
  properties,
}: {
  door: Door
  properties?: Property[]
}) => {
  const model = useData(
    () => through<ChurnModelState>(door, 'GET', '/churn-model'),
    [JSON.stringify(door)],
  )
  const action = useAction()
  const [polls, setPolls] = useState(0)
  const training = model.data?.status === 'training'
  useEffect(() => {
    if (!training || polls >= POLLS) return
    const timer = setTimeout(() => {
      setPolls(polls + 1)
      model.reload()
    }, POLL_MS)
    return () => clearTimeout(timer)
  }, [training, polls, model.data])
  const train = async () => {
    const started = await action.run(() =>
      through<TrainingStarted>(door, 'POST', '/churn-model/train'),
    )
    if (started) {
      setPolls(0)
      await model.reload()
    }
  }
  const m = model.data
  return html`<section aria-labelledby="churn-model-title">
    <h2 id="churn-model-title">Churn model</h2>
    ${model.error && html`<${Failed} error=${model.error} />`}
    ${action.error && html`<p role="alert" class="error">${action.error}</p>`}
    ${!m && !model.error && html`<${Loading} what="the churn model" />`}
    ${
      m &&
      html`<p id="churn-status" role="status">
          ${
            m.status === 'training'
              ? html`Training queued <${When} at=${m.started_at} />; the evaluation below is of the model serving now.`
              : m.status === 'failed'
                ? `The latest training failed: ${m.error ?? 'no reason given'}. The model trained before still serves.`
                : m.status === 'ready'
                  ? 'Ready: every customer has a probability.'
                  : 'No model trained yet.'
          }
        </p>
        <${Evaluation} model=${m} properties=${properties} />`
    }
    <div class="actions">
      <button type="button" class="primary" id="churn-train" disabled=${action.busy || training} onClick=${train}>
        Train now
      </button>
    </div>
  </section>`
}
