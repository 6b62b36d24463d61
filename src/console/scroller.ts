import { html } from 'htm/preact'
import type { ComponentChildren } from 'preact'
import { useEffect, useRef, useState } from 'preact/hooks'

type Hidden = 'none' | 'right' | 'left' | 'both'
const CUES: Record<Exclude<Hidden, 'none'>, string> = {
  right: 'More columns to the right: scroll sideways →',
  left: '← More columns to the left',
  both: '← More columns on both sides: scroll sideways →',
}

// A table wider than its place scrolls inside this frame, never the page. While columns are out of
// sight, a line above the table says on which side and that edge is shaded, so that no column is
// lost unseen. The frame takes the focus, so that the keyboard scrolls it too.
export const Scroller = ({ label, children }: { label: string; children: ComponentChildren }) => {
  const frame = useRef<HTMLDivElement>(null)
  const [hidden, setHidden] = useState<Hidden>('none')
  useEffect(() => {
    const el = frame.current!
    const measure = () => {
      const right = el.scrollLeft + el.clientWidth < el.scrollWidth - 1
      const left = el.scrollLeft > 1
      setHidden(right && left ? 'both' : right ? 'right' : left ? 'left' : 'none')
    }
    measure()
    // The frame's width follows the window's, the table's its rows and columns.
    const resized = new ResizeObserver(measure)
    resized.observe(el)
    for (const child of el.children) resized.observe(child)
    el.addEventListener('scroll', measure, { passive: true })
    return () => {
      resized.disconnect()
      el.removeEventListener('scroll', measure)
    }
  }, [])
  return html`<div class="scroller" data-hidden=${hidden}>
    ${hidden !== 'none' && html`<p class="scroll-cue" aria-hidden="true">${CUES[hidden]}</p>`}
    <div class="table-wrap" ref=${frame} tabindex="0" role="region" aria-label=${`${label}, table`}>${children}</div>
  </div>`
}
