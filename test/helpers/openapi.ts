import { Ajv2020 } from 'ajv/dist/2020.js'
import addFormats from 'ajv-formats'

// A schema of the document made standalone for a JSON Schema validator: the components it
// references travel with it as $defs.
export const standalone = (doc: any, schema: object) =>
  JSON.parse(
    JSON.stringify({ ...schema, $defs: doc.components.schemas }).replaceAll('"#/components/schemas/', '"#/$defs/'),
  )

// Draft 2020-12, as the document declares; formats (date-time, date, email) are checked too.
export const validator = (options: { formats: boolean }) => {
  const ajv = new Ajv2020({ strict: true, allErrors: true, validateFormats: options.formats })
  if (options.formats) addFormats.default(ajv)
  return ajv
}
