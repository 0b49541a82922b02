/** A batch that does not continue from where the server is; the sync should re-read the state. */
export class ConflictError extends Error {}
