//! The one harness for a running stack: a fresh migrated database, the real ingress on
//! it (configured by [`crate::fixtures`]), optionally a worker, and a client that
//! delivers [`SignedRequest`]s; optionally a proxy in front of the database that a test
//! cuts or stalls. Suites that need more processes (several ingresses, a private
//! cluster) start them beside a `Stack` with the options it uses ([`Stack::options`]).

use sqlx::PgPool;

use crate::fixtures::{self, Provider, Variant};
use crate::http::{Answer, HttpClient};
use crate::proxy::{DbProxy, database_addr};
use crate::signing::SignedRequest;
use crate::{Service, ServiceOptions, TestDatabase};

/// A database with an ingress (and perhaps a worker) running on it.
pub struct Stack {
    /// The database (dropped with the stack).
    pub database: TestDatabase,
    /// The ingress.
    pub ingress: Service,
    /// The worker, when started ([`StackBuilder::worker`]).
    pub worker: Option<Service>,
    /// A keep-alive client.
    pub client: HttpClient,
    /// The proxy the processes reach the database through, when asked for
    /// ([`StackBuilder::through_proxy`]).
    pub proxy: Option<DbProxy>,
}

/// How to start a [`Stack`].
#[derive(Default)]
pub struct StackBuilder {
    proxy: Option<ProxyAtStart>,
    ingress: Option<Adjust>,
    worker: Option<Adjust>,
}

type Adjust = Box<dyn FnOnce(ServiceOptions) -> ServiceOptions>;

#[derive(Clone, Copy, PartialEq, Eq)]
enum ProxyAtStart {
    Open,
    Cut,
}

impl StackBuilder {
    /// The ingress's options, adjusted (flags, environment, configuration).
    pub fn ingress(
        mut self,
        adjust: impl FnOnce(ServiceOptions) -> ServiceOptions + 'static,
    ) -> Self {
        self.ingress = Some(Box::new(adjust));
        self
    }

    /// A worker too, with the fixture's options adjusted.
    pub fn worker(
        mut self,
        adjust: impl FnOnce(ServiceOptions) -> ServiceOptions + 'static,
    ) -> Self {
        self.worker = Some(Box::new(adjust));
        self
    }

    /// The processes reach the database through a proxy ([`Stack::proxy`]).
    pub fn through_proxy(mut self) -> Self {
        self.proxy = Some(ProxyAtStart::Open);
        self
    }

    /// [`StackBuilder::through_proxy`], with the database cut away before anything starts.
    pub fn through_a_cut_proxy(mut self) -> Self {
        self.proxy = Some(ProxyAtStart::Cut);
        self
    }

    /// Creates the database and starts the processes, each waited for until it listens.
    pub async fn start(self) -> Stack {
        let database = TestDatabase::create().await;
        let proxy = match self.proxy {
            None => None,
            Some(at_start) => {
                let proxy = DbProxy::start(database_addr(database.url())).await;
                if at_start == ProxyAtStart::Cut {
                    proxy.cut();
                }
                Some(proxy)
            }
        };
        let url = proxy.as_ref().map_or_else(
            || database.url().to_owned(),
            |proxy| proxy.rewrite_url(database.url()),
        );
        let options = fixtures::ingress_options(&url);
        let adjust_ingress = self.ingress.unwrap_or_else(|| Box::new(|options| options));
        let ingress = Service::ingress(&adjust_ingress(options.clone()));
        let worker = self.worker.map(|adjust| Service::worker(&adjust(options)));
        Stack {
            database,
            ingress,
            worker,
            client: HttpClient::new(),
            proxy,
        }
    }
}

impl Stack {
    /// A database and an ingress with the fixture's configuration.
    pub async fn start() -> Self {
        Self::builder().start().await
    }

    /// To start something else.
    pub fn builder() -> StackBuilder {
        StackBuilder::default()
    }

    /// The fixture's options on this stack's database (through its proxy, if it has one):
    /// what its own processes started with, before adjustment.
    pub fn options(&self) -> ServiceOptions {
        let url = self.proxy.as_ref().map_or_else(
            || self.database.url().to_owned(),
            |proxy| proxy.rewrite_url(self.database.url()),
        );
        fixtures::ingress_options(&url)
    }

    /// The proxy in front of the database.
    pub fn proxy(&self) -> &DbProxy {
        self.proxy
            .as_ref()
            .expect("a stack started with through_proxy()")
    }

    /// The worker.
    pub fn worker(&self) -> &Service {
        self.worker.as_ref().expect("a stack started with a worker")
    }

    /// The database pool.
    pub fn pool(&self) -> &PgPool {
        self.database.pool()
    }

    /// Sends `request` to the ingress; panics when no answer comes.
    pub async fn deliver(&self, request: &SignedRequest) -> Answer {
        self.try_deliver(request)
            .await
            .unwrap_or_else(|error| panic!("no answer to {}: {error}", request.integration))
    }

    /// Sends the fixture's routed Stripe event `event_id` (signed now); panics when no
    /// answer comes.
    pub async fn deliver_event(&self, event_id: &str) -> Answer {
        self.deliver(&Provider::Stripe.request(Variant::Routed(event_id)))
            .await
    }

    /// Sends `request` to the ingress; `Err` when no answer came.
    pub async fn try_deliver(&self, request: &SignedRequest) -> Result<Answer, String> {
        request.send(&self.client, &self.ingress).await
    }
}
