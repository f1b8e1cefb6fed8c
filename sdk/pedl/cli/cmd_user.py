"""`det user login|logout|whoami|token|create|list|change-password|activate|deactivate|rename|
link-with-agent-user`: accounts on the scheduler, the login in auth.json."""

from __future__ import annotations

import argparse
import getpass
import sys

import grpc

from pedl import _grpc, auth
from pedl.cli import cmd_refused, output, render
from pedl.cli.client import resolve_master
from pedl.cli.errors import EXIT_BAD_INPUT, CliError
from pedl.v1 import auth_pb2, auth_pb2_grpc

_TIMEOUT = 30.0


def register(group: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    """Adds the group's commands to its parser (pedl.cli.main makes the parser, names and help)."""
    commands = group.add_subparsers(dest="command", required=True, metavar="COMMAND")

    login = commands.add_parser("login", parents=[common], help="log in; the token is kept in auth.json")
    login.add_argument("username", nargs="?", metavar="USERNAME", help="default: your login name")
    login.add_argument("--password-stdin", action="store_true", help="read the password from stdin")
    login.set_defaults(func=user_login)

    logout = commands.add_parser("logout", parents=[common], help="end this session")
    logout.add_argument("--all", action="store_true", help="end every session of this user, on every machine")
    logout.set_defaults(func=user_logout)
    commands.add_parser("whoami", parents=[common], help="who this login is").set_defaults(func=user_whoami)
    commands.add_parser(
        "token", parents=[common], help="print this login's token (for grpcurl's -H 'authorization: Bearer')"
    ).set_defaults(func=user_token)

    create = commands.add_parser("create", parents=[common], help="create a user (admins only)")
    create.add_argument("username", metavar="USERNAME")
    create.add_argument("--admin", action="store_true", help="the new user is an admin")
    create.add_argument("--password-stdin", action="store_true", help="read the new password from stdin")
    create.set_defaults(func=user_create)

    change = commands.add_parser(
        "change-password",
        parents=[common],
        help="change your password, giving the current one (an admin: anyone's); ends the user's other "
        "sessions",
    )
    change.add_argument("target_user", nargs="?", metavar="USERNAME", help="default: the logged-in user")
    change.add_argument(
        "--password-stdin",
        action="store_true",
        help="read the passwords from stdin: your current one, then the new one, a line each (an admin "
        "setting another user's: the new one only)",
    )
    change.set_defaults(func=user_change_password)
    for verb, help_text in (
        ("activate", "let a deactivated user log in again (admins only)"),
        ("deactivate", "stop a user logging in and end their sessions (admins only)"),
    ):
        parser = commands.add_parser(verb, parents=[common], help=help_text)
        parser.add_argument("username", metavar="USERNAME")
        parser.set_defaults(func=user_set_active)

    rename = commands.add_parser(
        "rename", parents=[common], help="give a user a new username; their experiments follow (admins only)"
    )
    rename.add_argument("target_user", metavar="USERNAME")
    rename.add_argument("new_username", metavar="NEW_USERNAME")
    rename.set_defaults(func=user_rename)

    link = commands.add_parser(
        "link-with-agent-user",
        parents=[common],
        help="run a user's trials as this Unix user and group on agents started as root (admins only)",
    )
    link.add_argument("username", metavar="USERNAME")
    link.add_argument("--agent-uid", type=int, required=True, metavar="UID", help="the Unix user id (not 0)")
    link.add_argument("--agent-gid", type=int, required=True, metavar="GID", help="the Unix group id (not 0)")
    link.add_argument("--agent-user", default="", metavar="NAME", help="the Unix user name trials see")
    link.add_argument("--agent-group", default="", metavar="NAME", help="the Unix group name trials see")
    link.set_defaults(func=user_link_agent_user)

    list_ = commands.add_parser("list", parents=[common], help="list users")
    output.add_format_flags(list_)
    list_.set_defaults(func=user_list)
    cmd_refused.register_verbs("user", commands, common)


def _password(from_stdin: bool, prompt: str, confirm: bool = False) -> str:
    if from_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    else:
        password = getpass.getpass(prompt)
        if confirm and getpass.getpass("Repeat it: ") != password:
            raise CliError("the passwords differ", EXIT_BAD_INPUT)
    if not password:
        raise CliError("the password is empty", EXIT_BAD_INPUT)
    return password


def _stub(args: argparse.Namespace) -> tuple[auth_pb2_grpc.AuthServiceStub, grpc.Channel]:
    args.master_address = resolve_master(getattr(args, "master", None))
    channel = _grpc.channel(args.master_address)
    return auth_pb2_grpc.AuthServiceStub(channel), channel


def user_login(args: argparse.Namespace) -> int:
    from pedl.auth.login import login

    args.master_address = resolve_master(getattr(args, "master", None))
    username = args.username or getpass.getuser()
    password = _password(args.password_stdin, f"Password for {username} at {args.master_address}: ")
    reply = login(args.master_address, username, password)
    role = " (admin)" if reply.user.admin else ""
    print(f"Logged in to {args.master_address} as {reply.user.username}{role} until {reply.expires_at}")
    return 0


def user_logout(args: argparse.Namespace) -> int:
    stub, channel = _stub(args)
    try:
        if auth.load_logins().get(args.master_address) is None:
            print(f"Not logged in to {args.master_address}")
            return 0
        reply = stub.Logout(auth_pb2.LogoutRequest(all=args.all), timeout=_TIMEOUT)
    finally:
        auth.forget_login(args.master_address)
        channel.close()
    ended = f" (ended {reply.ended} session{'s' if reply.ended != 1 else ''})" if args.all else ""
    print(f"Logged out of {args.master_address}{ended}")
    return 0


def user_token(args: argparse.Namespace) -> int:
    master = resolve_master(getattr(args, "master", None))
    entry = auth.load_logins().get(master)
    if not entry or not entry.get("token"):
        raise CliError(f"not logged in to {master}: run `pedl user login`")
    print(entry["token"])
    return 0


def user_whoami(args: argparse.Namespace) -> int:
    stub, channel = _stub(args)
    with channel:
        user = stub.WhoAmI(auth_pb2.WhoAmIRequest(), timeout=_TIMEOUT).user
    print(f"{user.username}{' (admin)' if user.admin else ''} at {args.master_address}")
    return 0


def user_create(args: argparse.Namespace) -> int:
    password = _password(args.password_stdin, f"Password for the new user {args.username}: ", confirm=True)
    stub, channel = _stub(args)
    with channel:
        request = auth_pb2.CreateUserRequest(username=args.username, password=password, admin=args.admin)
        user = stub.CreateUser(request, timeout=_TIMEOUT).user
    print(f"Created user {user.username}{' (admin)' if user.admin else ''}")
    return 0


def user_list(args: argparse.Namespace) -> int:
    stub, channel = _stub(args)
    with channel:
        users = stub.ListUsers(auth_pb2.ListUsersRequest(), timeout=_TIMEOUT).users
    rows = [
        (u.username, "yes" if u.admin else "", "yes" if u.active else "no", render.short_time(u.created_at))
        for u in users
    ]
    data = [
        {"username": u.username, "admin": u.admin, "active": u.active, "created_at": u.created_at or None}
        for u in users
    ]
    output.emit(args, data, render.table(["USERNAME", "ADMIN", "ACTIVE", "CREATED"], rows))
    return 0


def user_change_password(args: argparse.Namespace) -> int:
    stub, channel = _stub(args)
    with channel:
        me = stub.WhoAmI(auth_pb2.WhoAmIRequest(), timeout=_TIMEOUT).user.username
        username = args.target_user or me
        current = ""
        if username == me:
            current = _password(args.password_stdin, f"Current password for {username}: ")
        password = _password(args.password_stdin, f"New password for {username}: ", confirm=True)
        request = auth_pb2.SetUserPasswordRequest(
            username=username, password=password, current_password=current
        )
        reply = stub.SetUserPassword(request, timeout=_TIMEOUT)
    ended = reply.sessions_ended
    others = "other " if username == me else ""
    print(f"Changed the password of {username}; ended {ended} {others}session{'' if ended == 1 else 's'}")
    return 0


def user_set_active(args: argparse.Namespace) -> int:
    active = args.command == "activate"
    stub, channel = _stub(args)
    with channel:
        request = auth_pb2.SetUserActiveRequest(username=args.username, active=active)
        stub.SetUserActive(request, timeout=_TIMEOUT)
    print(f"{'Activated' if active else 'Deactivated'} user {args.username}")
    return 0


def user_rename(args: argparse.Namespace) -> int:
    stub, channel = _stub(args)
    with channel:
        request = auth_pb2.RenameUserRequest(username=args.target_user, new_username=args.new_username)
        stub.RenameUser(request, timeout=_TIMEOUT)
    print(f"Renamed user {args.target_user} to {args.new_username}")
    return 0


def user_link_agent_user(args: argparse.Namespace) -> int:
    if args.agent_uid <= 0 or args.agent_gid <= 0:
        raise CliError(
            "--agent-uid and --agent-gid must be above 0: trials never run as root", EXIT_BAD_INPUT
        )
    stub, channel = _stub(args)
    agent_user = auth_pb2.AgentUser(
        uid=args.agent_uid, gid=args.agent_gid, user=args.agent_user, group=args.agent_group
    )
    with channel:
        stub.LinkAgentUser(
            auth_pb2.LinkAgentUserRequest(username=args.username, agent_user=agent_user), timeout=_TIMEOUT
        )
    print(f"{args.username}'s trials run as uid {args.agent_uid}, gid {args.agent_gid} on root agents")
    return 0
