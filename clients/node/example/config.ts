// The example API's settings, from its environment.

export interface Config {
  port: number;
  /** Postgres: the product's database, which holds the fleet's tables too (`fleet db upgrade`). */
  databaseUrl: string;
  /** The fleet's job-status service (`shared.api.service`) and its token. */
  jobApiUrl: string;
  jobApiToken: string;
  /** API key -> org id: the example's own (toy) authentication. */
  keys: Record<string, string>;
}

export function config(env: NodeJS.ProcessEnv = process.env): Config {
  const need = (name: string): string => {
    const value = env[name];
    if (!value) throw new Error(`${name} is not set`);
    return value;
  };
  return {
    port: Number(env.PORT ?? 8190),
    // A SQLAlchemy URL (postgresql+psycopg://...) as the fleet's settings write it works too.
    databaseUrl: need("DATABASE_URL").replace(/^postgresql\+\w+:/, "postgresql:"),
    jobApiUrl: need("JOB_API_URL").replace(/\/$/, ""),
    jobApiToken: need("JOB_API_TOKEN"),
    keys: JSON.parse(need("PRODUCT_API_KEYS")),
  };
}
