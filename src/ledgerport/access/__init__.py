"""An app's access to a business: granted by consent, ended by uninstall or revocation.

The one place above ``apps`` (installations) and ``auth`` (tokens, codes) that changes both in
one transaction: the consent decision of the authorization and device pages installs or widens
the app's installation; ending an installation revokes its tokens, cancels its codes and device
codes, and records ``app.uninstalled``.
"""

from ._consent import AccessError as AccessError
from ._consent import BusinessNotOffered as BusinessNotOffered
from ._consent import NoBusinessToConnect as NoBusinessToConnect
from ._consent import NoBusinessToInstallIn as NoBusinessToInstallIn
from ._consent import approve as approve
from ._consent import consent_businesses as consent_businesses
from ._consent import install_businesses as install_businesses
from ._ending import end_installation as end_installation
from ._ending import revoke_access as revoke_access
from ._ending import uninstall as uninstall
