"""An app's access to a business: granted by consent, ended by uninstall or revocation.

The one place above ``apps`` (installations) and ``auth`` (tokens, codes) that changes both in
one transaction, and the one rule of which businesses a page offers: the consent decision of the
authorization and device pages and the marketplace's one-click install install or widen the
app's installation; ending an installation revokes its tokens, cancels its codes and device
codes, and records ``app.uninstalled``.
"""

from ._consent import AccessError as AccessError
from ._consent import BusinessNotOffered as BusinessNotOffered
from ._consent import NoBusinessToConnect as NoBusinessToConnect
from ._consent import NoBusinessToInstallIn as NoBusinessToInstallIn
from ._consent import NoScopeChosen as NoScopeChosen
from ._consent import Standing as Standing
from ._consent import Through as Through
from ._consent import approve as approve
from ._consent import consent_businesses as consent_businesses
from ._consent import install_businesses as install_businesses
from ._consent import install_from_marketplace as install_from_marketplace
from ._consent import none_offered as none_offered
from ._consent import offered as offered
from ._consent import offers as offers
from ._consent import preselected as preselected
from ._consent import reachable as reachable
from ._consent import standings as standings
from ._ending import end_installation as end_installation
from ._ending import revoke_access as revoke_access
from ._ending import uninstall as uninstall
