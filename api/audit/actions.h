// Every action the audit log records, written once: its name, what its
// target is and what it means. The routes name an action as a literal that
// must be in this table (AuditAction checks it while compiling: an action
// missing here is a build error, not a row nobody can look up), and
// `ductus reference docs` writes audit.md from it.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace ductus::api {

struct AuditActionInfo {
  std::string_view name;    // "session.create"
  std::string_view target;  // the row's target kind: "user", "message", ...
  std::string_view meaning;
};

inline constexpr AuditActionInfo kAuditActions[] = {
    // Sign-in and the caller's own account.
    {"session.create", "user",
     "someone signed in (password, directory or single sign-on), or failed to: outcome denied "
     "with the reason in detail"},
    {"session.delete", "session", "someone signed out"},
    {"user.settings", "user", "a user changed their own console settings (the theme)"},
    {"user.password", "user",
     "a user changed their own password, or gave a wrong current password (denied)"},
    {"user.totp.begin", "user", "a user began setting up a second factor"},
    {"user.totp.enable", "user", "a user turned their second factor on (or gave a wrong code)"},
    {"user.totp.disable", "user", "a user turned their second factor off (or gave a wrong code)"},
    // Administration of users and tokens (the API and `ductus user` / `ductus token`).
    {"user.create", "user", "an admin (or `ductus user add`) made a user"},
    {"user.disable", "user", "a user was disabled: their sessions and tokens end"},
    {"user.enable", "user", "a disabled user was enabled again"},
    {"user.password_reset", "user", "an admin set a user's password; they change it at sign-in"},
    {"user.role", "user",
     "a user's role changed (by an admin, or by the directory's groups at sign-in or refresh)"},
    {"user.totp.reset", "user", "an admin removed a user's second factor"},
    {"user.directory_left", "user",
     "the directory no longer has a signed-in directory user: their sessions end"},
    {"auth.totp", "auth", "an admin chose the roles that must use a second factor"},
    {"token.create", "token", "an API token was made"},
    {"token.revoke", "token", "an API token was revoked"},
    // The engine.
    {"engine.start", "engine", "an engine started (written by the engine)"},
    {"engine.stop", "engine", "an engine stopped (written by the engine)"},
    {"engine.drain", "engine", "an operator began a drain: intake closed, queues emptying"},
    {"engine.undrain", "engine", "an operator ended a drain"},
    {"interface.restart", "interface", "an operator restarted an interface's workers"},
    {"interface.stop", "interface", "an operator stopped an interface's intake"},
    {"interface.start", "interface", "an operator started an interface's intake again"},
    {"destination.pause", "destination", "an operator paused a destination"},
    {"destination.resume", "destination", "an operator resumed a destination"},
    {"retention.confirm", "interface",
     "an admin confirmed an interface's shorter retention tier (its messages follow it)"},
    {"alert.acknowledge", "alert", "someone acknowledged an alert"},
    {"alert.silence", "alert", "someone silenced an alert until a time"},
    // Messages (reads of payloads are recorded too).
    {"message.search", "interface", "someone searched messages by content"},
    {"message.payload", "message", "someone read a message's payload or an output"},
    {"message.export", "message", "someone exported messages with their payloads"},
    {"message.edit", "message", "someone edited a message: its copy is sent, the original kept"},
    {"message.try", "interface", "someone ran an interface's code on a payload (a dry run)"},
    {"message.resend", "message", "someone resent messages (to all or chosen destinations)"},
    {"message.dismiss", "message", "someone dismissed a quarantined message, with a reason"},
    // The audit log itself.
    {"audit.export", "audit", "someone exported the audit log"},
};

consteval bool isAuditAction(std::string_view name) {
  for (const auto& a : kAuditActions)
    if (a.name == name) return true;
  return false;
}

// Called only while compiling an AuditAction whose name is not in
// kAuditActions: the compiler names this function in its error.
void unknown_audit_action_add_it_to_api_audit_actions_h();

// An action of the table, named by a literal: `auditEntryFor(caller,
// "message.resend")` compiles only when kAuditActions lists
// "message.resend". "" is an entry whose action is set later.
class AuditAction {
 public:
  consteval AuditAction(const char* name) : name_(name) {  // NOLINT: implicit on purpose
    if (!name_.empty() && !isAuditAction(name_))
      unknown_audit_action_add_it_to_api_audit_actions_h();
  }
  std::string_view name() const { return name_; }
  std::string str() const { return std::string(name_); }

 private:
  std::string_view name_;
};

}  // namespace ductus::api
