import { Ajv2020 } from 'ajv/dist/2020.js'
import addFormats from 'ajv-formats'

// A schema of the document made standalone for a JSON Schema validator: the components it
// references travel with it as $defs.
export const standalone = (doc: any, schema: object) =>
  JSON.parse(
    JSON.stringify({ ...schema, $defs: doc.components.schemas }).replaceAll(
      '"#/components/schemas/',
      '"#/$defs/',
    ),
  )

// Draft 2020-12, as the document declares; formats (date-time, date, email) are checked too.
export const validator = (options: { formats: boolean }) => {
  const ajv = new Ajv2020({ strict: true, allErrors: true, validateFormats: options.formats })
  if (options.formats) addFormats.default(ajv)
  // The document's one extension keyword (src/uploads/schemas.ts): no two items of the array have
  // the same value at the key it names, a rule JSON Schema cannot state.
  ajv.addKeyword({
    keyword: 'x-unique-key',
    type: 'array',
    schemaType: 'string',
    validate: (key: string, items: Record<string, unknown>[]) =>
      new Set(items.map((item) => item?.[key])).size === items.length,
  })
  return ajv
}
