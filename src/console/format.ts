export const customerHref = (id: string) => `#/customer/${encodeURIComponent(id)}`

export const score = (value: number | null) => (value === null ? '–' : String(value))

export const signed = (value: number) => (value > 0 ? `+${value}` : value < 0 ? `−${-value}` : '±0')

// Green (no risk) through amber to red (certain churn); grey until scored. At 33% lightness every hue
// keeps 3.2:1 or more against the white plot (the grey 4.5:1), as non-text contrast asks.
export const riskColour = (risk: number | null) =>
  risk === null ? 'hsl(0 0% 46%)' : `hsl(${Math.round(130 - 1.3 * risk)} 75% 33%)`
