import { html } from 'htm/preact'
import { useEffect, useMemo, useRef, useState } from 'preact/hooks'
import { aggregate, churnModel, type Condition, type Point, type Segment } from './api.ts'
import { FilterBuilder } from './filters.ts'
import { customerHref, customersHref, percent, riskColour } from './format.ts'
import { useData } from './load.ts'
import { narrow, SegmentPicker, unscoredOf } from './segments.ts'

// The canvas's own square of units, drawn at whatever width the page gives it (pointer positions
// are scaled back); the margin holds the axes and the quadrants' names, so no label covers a point.
const SIZE = 600
const MARGIN = 44
const PLOT = SIZE - 2 * MARGIN
// Up to this many scored customers the matrix draws each one; beyond, the aggregate grid of counts.
const MAX_POINTS = 10_000
// The grid's cells: 10 a side, 20 score points wide (docs/api.md, "Aggregates").
const CELLS = 10
const CELL = PLOT / CELLS
const LINE = 14
// How near (in CSS pixels) the pointer must be to a point to pick it.
const REACH = 8

const px = (fit: number) => MARGIN + ((fit + 100) / 200) * PLOT
const py = (engagement: number) => MARGIN + ((100 - engagement) / 200) * PLOT

const LABEL = '#333'
// A canvas position as a share of the canvas, where the tooltip goes however wide the
// canvas is shown.
const position = (at: number) => `${(at / SIZE) * 100}%`

// A quadrant's name in the margin beside its quadrant, turned when it stands on the right.
const quadrant = (
  g: CanvasRenderingContext2D,
  text: string,
  x: number,
  y: number,
  turned = false,
) => {
  g.save()
  g.font = '600 14px system-ui, sans-serif'
  g.fillStyle = LABEL
  g.textAlign = 'center'
  g.translate(x, y)
  if (turned) g.rotate(Math.PI / 2)
  g.fillText(text, 0, 0)
  g.restore()
}

// What the matrix shows: each customer, or past MAX_POINTS the grid's counts and each cell's mean
// churn probability.
interface Shown {
  count: number
  scored: number
  points: Point[]
  grid?: number[][]
  probabilities?: (number | null)[][]
}

// What colours a point, or a grid cell: the rule-based churn risk (0..100), or the learned churn
// probability (0..1, on the same scale from green to red) when the account has a ready model.
type Colour = 'risk' | 'probability'
const probabilityColour = (p: number | null) => riskColour(p === null ? null : p * 100)
const pointColour = (c: Point, colour: Colour) =>
  colour === 'probability' ? probabilityColour(c.churn_probability) : riskColour(c.churn_risk)

// Cells are squares whose area grows with their count, the count written in them; their depth of
// colour grows with it too, or they wear the cell's mean churn probability.
const drawGrid = (
  g: CanvasRenderingContext2D,
  grid: number[][],
  probabilities?: (number | null)[][],
) => {
  const most = Math.max(1, ...grid.flat())
  g.font = '10px system-ui, sans-serif'
  g.textAlign = 'left'
  grid.forEach((row, i) =>
    row.forEach((n, j) => {
      if (!n) return
      const [left, top] = [MARGIN + j * CELL, MARGIN + (CELLS - 1 - i) * CELL]
      const share = n / most
      // The square fills the cell below its count's line.
      const room = CELL - LINE - 2
      const side = Math.max(4, Math.sqrt(share) * room)
      g.fillStyle = probabilities
        ? probabilityColour(probabilities[i][j])
        : `hsl(215 60% ${Math.round(70 - 35 * share)}%)`
      g.fillRect(left + (CELL - side) / 2, top + LINE + (room - side) / 2, side, side)
      g.fillStyle = 'rgb(255 255 255 / 0.85)'
      const text = String(n)
      g.fillRect(left + 1, top + 1, g.measureText(text).width + 4, LINE - 1)
      g.fillStyle = LABEL
      g.fillText(text, left + 3, top + 11)
    }),
  )
}

const draw = (canvas: HTMLCanvasElement, shown: Shown | undefined, colour: Colour) => {
  // As many device pixels as the canvas covers, so that it is sharp at any width.
  const ratio =
    ((window.devicePixelRatio || 1) * (canvas.getBoundingClientRect().width || SIZE)) / SIZE
  canvas.width = Math.round(SIZE * ratio)
  canvas.height = Math.round(SIZE * ratio)
  const g = canvas.getContext('2d')!
  g.scale(ratio, ratio)
  const mid = MARGIN + PLOT / 2
  g.fillStyle = '#eef6ee'
  g.fillRect(mid, MARGIN, PLOT / 2, PLOT / 2)
  g.fillStyle = '#fbeeed'
  g.fillRect(MARGIN, mid, PLOT, PLOT / 2)
  g.strokeStyle = '#767676'
  g.strokeRect(MARGIN, MARGIN, PLOT, PLOT)
  g.beginPath()
  g.moveTo(mid, MARGIN)
  g.lineTo(mid, MARGIN + PLOT)
  g.moveTo(MARGIN, mid)
  g.lineTo(MARGIN + PLOT, mid)
  g.stroke()

  g.fillStyle = LABEL
  g.font = '12px system-ui, sans-serif'
  for (const value of [-100, 0, 100]) {
    g.textAlign = 'center'
    g.fillText(String(value), px(value), MARGIN + PLOT + 16)
    g.textAlign = 'right'
    g.fillText(String(value), MARGIN - 6, py(value) + 4)
  }
  g.textAlign = 'center'
  g.fillText('Fit →', mid, SIZE - 8)
  g.save()
  g.translate(12, mid)
  g.rotate(-Math.PI / 2)
  g.fillText('Engagement →', 0, 0)
  g.restore()

  if (shown?.grid)
    drawGrid(g, shown.grid, colour === 'probability' ? shown.probabilities : undefined)
  g.globalAlpha = 0.8
  for (const c of shown?.points ?? []) {
    g.fillStyle = pointColour(c, colour)
    g.beginPath()
    g.arc(px(c.fitscore), py(c.engagementscore), 3.5, 0, 2 * Math.PI)
    g.fill()
  }
  g.globalAlpha = 1
  quadrant(g, 'Engaged, poor fit', MARGIN + PLOT / 4, MARGIN - 14)
  quadrant(g, 'Upsell', MARGIN + (3 * PLOT) / 4, MARGIN - 14)
  quadrant(g, 'Churn risk', MARGIN + PLOT + 14, MARGIN + (3 * PLOT) / 4, true)
}

// Points bucketed by REACH-sized cells, so a pointer move looks at the nine cells around it rather
// than at every point.
const cellOf = (x: number, y: number) => Math.floor(x / REACH) * 10_000 + Math.floor(y / REACH)
const indexOf = (points: Point[]) => {
  const cells = new Map<number, Point[]>()
  for (const c of points) {
    const key = cellOf(px(c.fitscore), py(c.engagementscore))
    cells.get(key)?.push(c) ?? cells.set(key, [c])
  }
  return cells
}
const nearest = (cells: Map<number, Point[]>, x: number, y: number) => {
  let best: Point | undefined
  let distance = REACH * REACH
  for (const dx of [-REACH, 0, REACH]) {
    for (const dy of [-REACH, 0, REACH]) {
      for (const c of cells.get(cellOf(x + dx, y + dy)) ?? []) {
        const d = (px(c.fitscore) - x) ** 2 + (py(c.engagementscore) - y) ** 2
        if (d <= distance) [best, distance] = [c, d]
      }
    }
  }
  return best
}

// The keyboard's way round the matrix: the nearest point in an arrow's direction, a step straight
// along it counting less than one to the side. Points on the very same spot stay behind the first.
const ARROWS: Record<string, [fit: number, engagement: number]> = {
  ArrowRight: [1, 0],
  ArrowLeft: [-1, 0],
  ArrowUp: [0, 1],
  ArrowDown: [0, -1],
}
const step = (points: Point[], from: Point, [dx, dy]: [number, number]) => {
  let best: Point | undefined
  let cost = Number.POSITIVE_INFINITY
  for (const c of points) {
    const x = c.fitscore - from.fitscore
    const y = c.engagementscore - from.engagementscore
    const along = x * dx + y * dy
    const aside = Math.abs(x * dy - y * dx)
    if (along > 0 && along + 2 * aside < cost) [best, cost] = [c, along + 2 * aside]
  }
  return best
}

// A grid cell's range of scores, as the aggregate counts it: 20 points from -100, the
// last with 100.
const range = (k: number) => `${-100 + 20 * k} to ${k === CELLS - 1 ? 100 : -81 + 20 * k}`
type Cell = { i: number; j: number; n: number }
const cellAt = (grid: number[][], x: number, y: number): Cell | undefined => {
  const [i, j] = [CELLS - 1 - Math.floor((y - MARGIN) / CELL), Math.floor((x - MARGIN) / CELL)]
  const n = grid[i]?.[j]
  return n ? { i, j, n } : undefined
}

// Grid first: it costs one scan of the matches and says how many are scored; only when they are few
// enough is each one asked for, so a large account never sorts and sends all of its customers.
const load = async (
  apiKey: string,
  filters: Condition[],
  segment: Segment | undefined,
  signal: AbortSignal,
) => {
  const selection = narrow(segment, filters)
  const { count, grid } = await aggregate(apiKey, { ...selection, matrix: 'grid' }, signal)
  if (grid!.scored > MAX_POINTS)
    return {
      count,
      scored: grid!.scored,
      points: [],
      grid: grid!.counts,
      probabilities: grid!.churn_probability,
    }
  const { points } = await aggregate(
    apiKey,
    { ...selection, matrix: 'points', points: MAX_POINTS },
    signal,
  )
  return { count, scored: points!.scored, points: points!.items }
}

export const Matrix = ({ apiKey }: { apiKey: string }) => {
  const canvas = useRef<HTMLCanvasElement>(null)
  const [filters, setFilters] = useState<Condition[]>([])
  const [segment, setSegment] = useState<Segment | undefined>()
  const [shown, setShown] = useState<Shown | undefined>()
  const [state, setState] = useState<'loading' | 'ready' | 'failed'>('loading')
  const [error, setError] = useState('')
  const [hover, setHover] = useState<Point | undefined>()
  const [cell, setCell] = useState<Cell | undefined>()
  const [colour, setColour] = useState<Colour>('risk')
  // The probability colours the matrix once a model has been trained (one that failed to train
  // again keeps serving); a key that cannot read the model has no choice to make.
  const model = useData(() => churnModel(apiKey), [apiKey])
  const learned = model.data?.trained_at != null
  const by = learned ? colour : 'risk'

  useEffect(() => {
    const stop = new AbortController()
    setState('loading')
    setError('')
    setHover(undefined)
    setCell(undefined)
    setShown(undefined)
    load(apiKey, filters, segment, stop.signal).then(
      (answer) => {
        setShown(answer)
        setState('ready')
      },
      (err: Error) => {
        if (stop.signal.aborted) return
        setError(err.message)
        setState('failed')
      },
    )
    return () => stop.abort()
  }, [apiKey, filters, segment])

  const points = shown?.points ?? []
  const cells = useMemo(() => indexOf(points), [shown])
  useEffect(() => {
    draw(canvas.current!, shown, by)
    const resized = new ResizeObserver(() => draw(canvas.current!, shown, by))
    resized.observe(canvas.current!)
    return () => resized.disconnect()
  }, [shown, by])

  const pick = (e: MouseEvent) => {
    const box = canvas.current!.getBoundingClientRect()
    const scale = SIZE / box.width
    const [x, y] = [(e.clientX - box.left) * scale, (e.clientY - box.top) * scale]
    if (shown?.grid) setCell(cellAt(shown.grid, x, y))
    else setHover(nearest(cells, x, y))
  }
  const leave = () => {
    setHover(undefined)
    setCell(undefined)
  }
  const open = () => {
    if (hover) location.hash = customerHref(hover.id)
  }
  const move = (e: KeyboardEvent) => {
    if (e.key === 'Enter') open()
    else if (e.key === 'Escape') setHover(undefined)
    else if (e.key in ARROWS && points.length) {
      e.preventDefault()
      setHover((hover && step(points, hover, ARROWS[e.key])) ?? hover ?? points[0])
    }
  }
  const grid = shown?.grid !== undefined
  const unscored = shown ? shown.count - shown.scored : 0
  const label = grid
    ? `Score matrix, aggregated: ${shown!.scored} customers counted in a 10 by 10 grid by fit (across) and ` +
      'engagement (up)'
    : `Score matrix: ${points.length} customers by fit (across) and engagement (up)`
  // Who is not scored yet, as the customers list shows them: the same selection, without a score.
  const unscoredNote =
    unscored > 0 &&
    html`, <a id="matrix-unscored" href=${customersHref(unscoredOf(narrow(segment, filters)))}>
      ${unscored} not scored yet</a>`
  const coloured = by === 'probability' ? 'churn probability' : 'churn risk'
  const note = grid
    ? html`${shown!.scored} customers counted in a 10 × 10 grid${unscoredNote}: more than ${MAX_POINTS} to draw one
        by one, so each square is the number of customers with scores in its cell${
          by === 'probability' ? ', coloured by their mean churn probability' : ''
        }. Narrow with a segment or filters to see each customer.`
    : html`${points.length} customers plotted${unscoredNote}. Each point is a customer, coloured by ${coloured}. On
        the matrix, arrow keys move from customer to customer and Enter opens one; the Customers view lists them
        all.`
  const legend = by === 'probability' ? ['Churn probability 0%', '100%'] : ['Churn risk 0', '100']
  return html`<section aria-labelledby="matrix-title">
    <h1 id="matrix-title">Score matrix</h1>
    <${SegmentPicker} apiKey=${apiKey} onPick=${setSegment} />
    <${FilterBuilder} apiKey=${apiKey} onApply=${setFilters} />
    ${
      learned &&
      html`<p>
        <label for="matrix-colour">Colour by</label>
        <select id="matrix-colour" value=${colour}
          onChange=${(e: Event) => setColour((e.target as HTMLSelectElement).value as Colour)}>
          <option value="risk">Churn risk (rules)</option>
          <option value="probability">Churn probability (learned)</option>
        </select>
      </p>`
    }
    ${error && html`<p role="alert" class="error">${error}</p>`}
    <p aria-live="polite" id="matrix-note">
      ${state === 'loading' && 'Loading… '}${grid && html`<strong>Aggregated: </strong>`}${note}
    </p>
    ${
      (!grid || by === 'probability') &&
      html`<div class="legend" aria-hidden="true">
        <span>${legend[0]}</span><span class="legend-bar"></span><span>${legend[1]}</span>
      </div>`
    }
    <div class="matrix">
      <canvas ref=${canvas} id="matrix" role="img" tabindex="0" data-points=${points.length} data-state=${state}
        data-mode=${grid ? 'grid' : 'points'} data-scored=${shown?.scored ?? 0} data-colour=${by}
        data-size=${SIZE} data-margin=${MARGIN} class=${hover ? 'pointing' : ''} aria-label=${label}
        onMouseMove=${pick} onMouseLeave=${leave} onClick=${open} onKeyDown=${move}></canvas>
      ${
        hover &&
        html`<div id="matrix-tip" class="tip" role="status"
          style=${{ left: position(px(hover.fitscore)), top: position(py(hover.engagementscore)) }}>
          <strong>${hover.name}</strong><br />
          engagement ${hover.engagementscore} · fit ${hover.fitscore} · churn risk ${hover.churn_risk ?? '–'}${
            hover.churn_probability !== null &&
            ` · churn probability ${percent(hover.churn_probability)}`
          }
        </div>`
      }
      ${
        cell &&
        html`<div id="matrix-tip" class="tip" role="status"
          style=${{ left: position(MARGIN + (cell.j + 0.5) * CELL), top: position(MARGIN + (CELLS - cell.i) * CELL) }}>
          <strong>${cell.n} customers</strong><br />
          engagement ${range(cell.i)} · fit ${range(cell.j)}${
            by === 'probability' &&
            shown!.probabilities?.[cell.i][cell.j] != null &&
            ` · mean churn probability ${percent(shown!.probabilities[cell.i][cell.j]!)}`
          }
        </div>`
      }
    </div>
  </section>`
}
