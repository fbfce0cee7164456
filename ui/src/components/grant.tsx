import type { Role } from '../session';

/** What a user or a token may do: a role, and the permissions beside it. */
export type Grant = { role: Role; payloads: boolean; audit: boolean };

export const noGrant: Grant = { role: 'viewer', payloads: false, audit: false };

export function permissionsOf(g: Grant): ('payloads' | 'audit')[] {
  return [...(g.payloads ? ['payloads' as const] : []), ...(g.audit ? ['audit' as const] : [])];
}

/** The role and permission fields of the create-a-user and create-a-token forms. */
export function GrantFields({ grant, onChange }: { grant: Grant; onChange: (g: Grant) => void }) {
  return (
    <>
      <label class="field">
        <span>Role</span>
        <select name="role" value={grant.role} onChange={(e) => onChange({ ...grant, role: e.currentTarget.value as Role })}>
          <option value="viewer">viewer</option>
          <option value="operator">operator</option>
          <option value="admin">admin</option>
        </select>
      </label>
      <fieldset class="field">
        <legend>Permissions</legend>
        <label class="inline">
          <input type="checkbox" checked={grant.payloads} onChange={() => onChange({ ...grant, payloads: !grant.payloads })} /> payloads
        </label>
        <label class="inline">
          <input type="checkbox" checked={grant.audit} onChange={() => onChange({ ...grant, audit: !grant.audit })} /> audit
        </label>
      </fieldset>
    </>
  );
}
