// A request the domain refuses: a status, a plain sentence, and where it applies, the fields at
// fault (a JSON pointer into the request and what is wrong there). Domain code throws it with
// refuse(); only src/http/ turns it into Problem Details.
export interface FieldError {
  path: string
  message: string
}

export class Refusal extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly errors?: FieldError[],
    // Retry-After and the like, which a client needs to act on the refusal.
    readonly headers?: Record<string, string>,
  ) {
    super(message)
  }
}

export const refuse = (
  status: number,
  message: string,
  errors?: FieldError[],
  headers?: Record<string, string>,
): never => {
  throw new Refusal(status, message, errors, headers)
}

// 400 for one field.
export const invalid = (path: string, message: string, detail = 'The request is invalid.'): never =>
  refuse(400, detail, [{ path, message }])
