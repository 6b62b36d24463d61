import { html } from 'htm/preact'
import { useEffect, useRef } from 'preact/hooks'
import uPlot from 'uplot'
import 'uplot/dist/uPlot.min.css'

// The 12 weeks of the home view: customers per quadrant (left axis) and the median engagement
// (right axis, dashed). Each series has its own dash as well as its colour, so the legend reads
// without colour; the table beside the chart holds the same numbers for screen readers and links.
export interface WeekSeries {
  label: string
  colour: string
  dash?: number[]
  values: (number | null)[]
  median?: true
}

const HEIGHT = 260

export const WeeksChart = ({
  days,
  series,
  label,
}: {
  days: string[]
  series: WeekSeries[]
  label: string
}) => {
  const box = useRef<HTMLDivElement>(null)
  useEffect(() => {
    const target = box.current!
    const width = () => Math.max(280, target.clientWidth)
    const plot = new uPlot(
      {
        width: width(),
        height: HEIGHT,
        // Dates as days, not times: the x values are the weeks' last days at midnight UTC.
        tzDate: (ts) => uPlot.tzDate(new Date(ts * 1000), 'Etc/UTC'),
        cursor: { drag: { x: false, y: false } },
        // Counts from 0 up, in whole customers: a series must name its scale, as uPlot takes an
        // undefined key for none, and an axis without a series' scale draws no ticks.
        scales: {
          x: { time: true },
          customers: { range: (_, _min, max) => [0, Math.max(4, Math.ceil(max * 1.1))] },
          median: { range: [-100, 100] },
        },
        axes: [
          {},
          {
            scale: 'customers',
            label: 'Customers',
            size: 56,
            incrs: [
              1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10_000, 20_000, 50_000, 100_000,
              200_000, 500_000, 1_000_000,
            ],
          },
          { scale: 'median', side: 1, label: 'Median engagement', size: 56, grid: { show: false } },
        ],
        series: [
          {
            label: 'Week ending',
            value: (_, ts) => (ts === null ? '–' : new Date(ts * 1000).toISOString().slice(0, 10)),
          },
          ...series.map((s) => ({
            label: s.label,
            stroke: s.colour,
            width: 2,
            dash: s.dash,
            scale: s.median ? 'median' : 'customers',
            points: { show: true, size: 6 },
          })),
        ],
      },
      [days.map((d) => Date.parse(d) / 1000), ...series.map((s) => s.values)],
      target,
    )
    const resized = new ResizeObserver(() => plot.setSize({ width: width(), height: HEIGHT }))
    resized.observe(target)
    return () => {
      resized.disconnect()
      plot.destroy()
    }
  }, [days.join(), JSON.stringify(series)])
  return html`<div class="weeks-chart" ref=${box} role="img" aria-label=${label}></div>`
}
