"""Business records and tenancy: businesses, users, memberships, role permissions, events."""

from ._errors import BooksError as BooksError
from ._errors import BusinessNotFound as BusinessNotFound
from ._errors import EmailTaken as EmailTaken
from ._errors import UserNotFound as UserNotFound
from ._events import Event as Event
from ._events import UnknownEventType as UnknownEventType
from ._events import events_after as events_after
from ._events import record_event as record_event
from ._invoices import list_invoices as list_invoices
from ._tenancy import Business as Business
from ._tenancy import Membership as Membership
from ._tenancy import User as User
from ._tenancy import businesses_of_user as businesses_of_user
from ._tenancy import create_business as create_business
from ._tenancy import create_user as create_user
from ._tenancy import find_user_by_email as find_user_by_email
from ._tenancy import get_business as get_business
from ._tenancy import get_membership as get_membership
from ._tenancy import get_user as get_user
from ._tenancy import normalize_email as normalize_email
from ._tenancy import role_permissions as role_permissions
from ._tenancy import set_membership as set_membership
from ._tenancy import set_role_permissions as set_role_permissions
