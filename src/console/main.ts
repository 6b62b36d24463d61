import { html, render } from 'htm/preact'
import { App } from './app.ts'
import './console.css'

render(html`<${App} />`, document.getElementById('app')!)
