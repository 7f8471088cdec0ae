// The AWS environment a store test runs in: nothing of the machine's own (keys, profiles, ~/.aws files, IMDS) leaks
// in, and each test names exactly the sources the default credential chain may find. The chain reads process.env
// when a call first needs credentials, so the store is made and used inside `withAwsEnv`.
import { E2bError } from "#shared/e2b/errors.ts";

const AWS_VARS = [
  "AWS_ACCESS_KEY_ID",
  "AWS_SECRET_ACCESS_KEY",
  "AWS_SESSION_TOKEN",
  "AWS_PROFILE",
  "AWS_DEFAULT_PROFILE",
  "AWS_REGION",
  "AWS_DEFAULT_REGION",
  "AWS_SHARED_CREDENTIALS_FILE",
  "AWS_CONFIG_FILE",
  "AWS_WEB_IDENTITY_TOKEN_FILE",
  "AWS_ROLE_ARN",
  "AWS_ROLE_SESSION_NAME",
  "AWS_ENDPOINT_URL",
  "AWS_ENDPOINT_URL_STS",
  "AWS_CONTAINER_CREDENTIALS_FULL_URI",
  "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
  "AWS_CONTAINER_AUTHORIZATION_TOKEN",
  "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
  "AWS_EC2_METADATA_DISABLED",
];

export async function withAwsEnv<T>(vars: Record<string, string>, fn: () => Promise<T>): Promise<T> {
  const saved = new Map(AWS_VARS.map((k) => [k, process.env[k]]));
  for (const k of AWS_VARS) delete process.env[k];
  // No file the machine's user may have, and no instance metadata lookup (it would only time out here).
  Object.assign(process.env, {
    AWS_SHARED_CREDENTIALS_FILE: "/nonexistent/aws/credentials",
    AWS_CONFIG_FILE: "/nonexistent/aws/config",
    AWS_EC2_METADATA_DISABLED: "true",
    ...vars,
  });
  try {
    return await fn();
  } finally {
    for (const [k, v] of saved) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
}

/** The E2bError `p` rejects with (anything else is rethrown); a call that succeeds fails the test. */
export async function caught(p: Promise<unknown>): Promise<E2bError> {
  try {
    await p;
  } catch (err) {
    if (err instanceof E2bError) return err;
    throw err;
  }
  throw new Error("expected the call to fail");
}
