import { html } from 'htm/preact'
import { useEffect, useMemo, useRef, useState } from 'preact/hooks'
import { type Customer, eachCustomer, type Filter } from './api.ts'
import { FilterBuilder } from './filters.ts'
import { customerHref, riskColour } from './format.ts'

// The canvas in CSS pixels; it scales down with the window, and pointer positions are scaled back.
const SIZE = 600
const MARGIN = 40
const PLOT = SIZE - 2 * MARGIN
const MAX_POINTS = 10_000
// How near (in CSS pixels) the pointer must be to a point to pick it.
const REACH = 8

type Scored = Customer & { fitscore: number; engagementscore: number }
const scored = (c: Customer): c is Scored => c.fitscore !== null && c.engagementscore !== null
const px = (fit: number) => MARGIN + ((fit + 100) / 200) * PLOT
const py = (engagement: number) => MARGIN + ((100 - engagement) / 200) * PLOT

const LABEL = '#333'
// A canvas position as a share of the canvas, where the tooltip goes however wide the canvas is shown.
const percent = (at: number) => `${(at / SIZE) * 100}%`

// A quadrant's name over the points, on a pale box so that it stays legible where they crowd.
const quadrant = (g: CanvasRenderingContext2D, text: string, x: number, y: number, align: CanvasTextAlign) => {
  g.font = '600 14px system-ui, sans-serif'
  g.textAlign = align
  const width = g.measureText(text).width
  const left = align === 'right' ? x - width : align === 'center' ? x - width / 2 : x
  g.fillStyle = 'rgb(255 255 255 / 0.85)'
  g.fillRect(left - 4, y - 14, width + 8, 19)
  g.fillStyle = LABEL
  g.fillText(text, x, y)
}

const draw = (canvas: HTMLCanvasElement, points: Scored[]) => {
  const ratio = window.devicePixelRatio || 1
  canvas.width = SIZE * ratio
  canvas.height = SIZE * ratio
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

  g.globalAlpha = 0.8
  for (const c of points) {
    g.fillStyle = riskColour(c.churn_risk)
    g.beginPath()
    g.arc(px(c.fitscore), py(c.engagementscore), 3.5, 0, 2 * Math.PI)
    g.fill()
  }
  g.globalAlpha = 1
  quadrant(g, 'Upsell', MARGIN + PLOT - 8, MARGIN + 20, 'right')
  quadrant(g, 'Engaged, poor fit', MARGIN + 8, MARGIN + 20, 'left')
  quadrant(g, 'Churn risk', mid, MARGIN + PLOT - 10, 'center')
}

// Points bucketed by REACH-sized cells, so a pointer move looks at the nine cells around it rather
// than at every point.
const cellOf = (x: number, y: number) => Math.floor(x / REACH) * 10_000 + Math.floor(y / REACH)
const indexOf = (points: Scored[]) => {
  const cells = new Map<number, Scored[]>()
  for (const c of points) {
    const key = cellOf(px(c.fitscore), py(c.engagementscore))
    cells.get(key)?.push(c) ?? cells.set(key, [c])
  }
  return cells
}
const nearest = (cells: Map<number, Scored[]>, x: number, y: number) => {
  let best: Scored | undefined
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
const step = (points: Scored[], from: Scored, [dx, dy]: [number, number]) => {
  let best: Scored | undefined
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

export const Matrix = ({ apiKey }: { apiKey: string }) => {
  const canvas = useRef<HTMLCanvasElement>(null)
  const [filters, setFilters] = useState<Filter[]>([])
  const [points, setPoints] = useState<Scored[]>([])
  const [seen, setSeen] = useState(0)
  const [state, setState] = useState<'loading' | 'ready' | 'failed'>('loading')
  const [capped, setCapped] = useState(false)
  const [error, setError] = useState('')
  const [hover, setHover] = useState<Scored | undefined>()

  useEffect(() => {
    const stop = new AbortController()
    const all: Scored[] = []
    let count = 0
    setState('loading')
    setCapped(false)
    setError('')
    setHover(undefined)
    setPoints([])
    eachCustomer(
      apiKey,
      filters,
      MAX_POINTS,
      (page) => {
        count += page.length
        all.push(...page.filter(scored))
        setSeen(count)
        setPoints([...all])
      },
      stop.signal,
    ).then(
      (more) => {
        setCapped(more)
        setState('ready')
      },
      (err: Error) => {
        if (stop.signal.aborted) return
        setError(err.message)
        setState('failed')
      },
    )
    return () => stop.abort()
  }, [apiKey, filters])

  const cells = useMemo(() => indexOf(points), [points])
  useEffect(() => draw(canvas.current!, points), [points])

  const pick = (e: MouseEvent) => {
    const box = canvas.current!.getBoundingClientRect()
    const scale = SIZE / box.width
    setHover(nearest(cells, (e.clientX - box.left) * scale, (e.clientY - box.top) * scale))
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
  const unscored = seen - points.length

  return html`<section aria-labelledby="matrix-title">
    <h1 id="matrix-title">Score matrix</h1>
    <${FilterBuilder} onApply=${setFilters} />
    ${error && html`<p role="alert" class="error">${error}</p>`}
    <p aria-live="polite">
      ${state === 'loading' && 'Loading… '}${points.length} customers plotted${
        unscored > 0 && `, ${unscored} not scored yet`
      }${capped && ` (the first ${MAX_POINTS}: narrow with filters to see others)`}.
      Each point is a customer, coloured by churn risk. On the matrix, arrow keys move from customer to
      customer and Enter opens one; the Customers view lists them all.
    </p>
    <div class="legend" aria-hidden="true">
      <span>Churn risk 0</span><span class="legend-bar"></span><span>100</span>
    </div>
    <div class="matrix">
      <canvas ref=${canvas} id="matrix" role="img" tabindex="0" data-points=${points.length} data-state=${state}
        data-size=${SIZE} data-margin=${MARGIN} class=${hover ? 'pointing' : ''}
        aria-label=${`Score matrix: ${points.length} customers by fit (across) and engagement (up)`}
        onMouseMove=${pick} onMouseLeave=${() => setHover(undefined)} onClick=${open} onKeyDown=${move}></canvas>
      ${
        hover &&
        html`<div id="matrix-tip" class="tip" role="status"
          style=${{ left: percent(px(hover.fitscore)), top: percent(py(hover.engagementscore)) }}>
          <strong>${hover.name}</strong><br />
          engagement ${hover.engagementscore} · fit ${hover.fitscore} · churn risk ${hover.churn_risk ?? '–'}
        </div>`
      }
    </div>
  </section>`
}
