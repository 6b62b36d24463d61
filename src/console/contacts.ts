import { html } from 'htm/preact'
import { useEffect, useState } from 'preact/hooks'
import { type Contact, contactsOf } from './api.ts'
import { Empty, Failed, Loading, Score, signed, When } from './format.ts'
import { Scroller } from './scroller.ts'

const LIMIT = 100

// A customer's contacts with their own engagement scores.
export const Contacts = ({ apiKey, customerId }: { apiKey: string; customerId: string }) => {
  const [contacts, setContacts] = useState<Contact[] | undefined>()
  const [more, setMore] = useState(false)
  const [error, setError] = useState('')
  useEffect(() => {
    // A late answer for the customer shown before is dropped.
    let current = true
    setContacts(undefined)
    setError('')
    contactsOf(apiKey, customerId, LIMIT).then(
      (page) => {
        if (!current) return
        setContacts(page.results)
        setMore(page.paging !== undefined)
      },
      (err: Error) => current && setError(err.message),
    )
    return () => {
      current = false
    }
  }, [apiKey, customerId])

  if (error) return html`<${Failed} error=${error} />`
  if (!contacts) return html`<${Loading} what="contacts" />`
  if (!contacts.length) return html`<${Empty}>No contacts.</${Empty}>`
  return html`<${Scroller} label="Contacts"><table class="contacts">
      <thead>
        <tr>
          <th scope="col">Name</th>
          <th scope="col">ID</th>
          <th scope="col">Engagement</th>
          <th scope="col">Change in 30 days</th>
          <th scope="col">Last seen</th>
        </tr>
      </thead>
      <tbody>
        ${contacts.map(
          (c) => html`<tr key=${c.id}>
            <td>${c.name}</td>
            <td>${c.id}</td>
            <td class="num"><${Score} kind="engagement" value=${c.engagementscore} /></td>
            <td class="num">${c.engagementscore_difference === null ? '–' : signed(c.engagementscore_difference)}</td>
            <td><${When} at=${c.last_seen} /></td>
          </tr>`,
        )}
      </tbody>
    </table></${Scroller}>
    ${more && html`<p>The first ${LIMIT} contacts, by id.</p>`}`
}
