//! A worker actor that does its work itself or splits it over child
//! workers it supervises: the nesting of ES's and ARS's perturbation
//! workers (the book's Nesting page). What the work is, a [`Work`] says:
//! how a leaf is built in its actor, how it answers a request, and how a
//! request splits over children and their answers join.
//!
//! A [`NestedWorker`] started with `num_children: 0` builds its `Work`
//! and answers requests itself; otherwise it spawns a pool of children
//! (an [`ActorPool`] it owns and that supervises them) and, for each
//! request, calls every child with its part at once and joins the answers
//! in child order. A child that dies is replaced and its part sent again
//! ([`ActorPool::call`]). The tree has at most two levels: children always
//! work themselves.

use rlx::evaluator::EvaluatorError;
use rlx::pool::{ActorPool, ChildArgs, PoolError};
use rlx::RestartPolicy;
use std::marker::PhantomData;
use std::sync::Arc;

/// What a [`NestedWorker`] does (see the module docs).
pub trait Work: Sized + Send + 'static {
    /// How to build the work in a leaf actor (cloned to every worker).
    type Spec: Clone + Send + Sync + 'static;
    /// One request.
    type Request: Clone + Send + Sync + 'static;
    /// Its answer.
    type Answer: Send + 'static;
    /// What the children are called in errors and logs.
    const CHILD: &'static str;

    /// Builds the work (in the actor that owns it).
    ///
    /// # Errors
    /// Whatever building fails on (an env, a network).
    fn build(spec: &Self::Spec) -> Result<Self, EvaluatorError>;

    /// Answers `request`.
    ///
    /// # Errors
    /// Whatever the work fails on.
    fn run(&mut self, request: &Self::Request) -> Result<Self::Answer, EvaluatorError>;

    /// `request` in `n` parts, one per child.
    fn split(request: &Self::Request, n: usize) -> Vec<Self::Request>;

    /// The children's answers, in child order, as one.
    fn join(answers: Vec<Self::Answer>) -> Self::Answer;
}

/// The actor (see the module docs).
pub struct NestedWorker<W>(PhantomData<fn() -> W>);

impl<W> NestedWorker<W> {
    /// The actor, to spawn.
    pub fn new() -> Self {
        Self(PhantomData)
    }
}

impl<W> Default for NestedWorker<W> {
    fn default() -> Self {
        Self::new()
    }
}

impl<W> Clone for NestedWorker<W> {
    fn clone(&self) -> Self {
        Self::new()
    }
}

/// How to start a [`NestedWorker`].
pub struct NestedArgs<W: Work> {
    /// Builds the work (in each leaf).
    pub spec: W::Spec,
    /// Child workers to split requests over (0: work here).
    pub num_children: usize,
    /// The children's supervisor's restart policy.
    pub restart: RestartPolicy,
}

impl<W: Work> Clone for NestedArgs<W> {
    fn clone(&self) -> Self {
        Self { spec: self.spec.clone(), num_children: self.num_children, restart: self.restart }
    }
}

/// Messages of a [`NestedWorker`].
pub enum NestedMsg<W: Work> {
    /// Answer this request.
    Run(W::Request, ractor::RpcReplyPort<Result<W::Answer, EvaluatorError>>),
}

impl<W: Work> ractor::Message for NestedMsg<W> {}

/// A worker's work, or its children.
pub enum NestedState<W: Work> {
    /// Works itself.
    Leaf(Box<W>),
    /// Splits its requests over children it supervises.
    Parent(ActorPool<NestedWorker<W>>),
}

impl<W: Work> ractor::Actor for NestedWorker<W> {
    type Msg = NestedMsg<W>;
    type State = NestedState<W>;
    type Arguments = NestedArgs<W>;

    async fn pre_start(
        &self,
        _: ractor::ActorRef<NestedMsg<W>>,
        args: NestedArgs<W>,
    ) -> Result<NestedState<W>, ractor::ActorProcessingErr> {
        if args.num_children == 0 {
            return Ok(NestedState::Leaf(Box::new(W::build(&args.spec)?)));
        }
        let child = NestedArgs::<W> { num_children: 0, ..args.clone() };
        let child_args: ChildArgs<NestedWorker<W>> = Arc::new(move |_, _| child.clone());
        let pool = ActorPool::spawn(W::CHILD, Self::new(), args.num_children, child_args, args.restart).await?;
        Ok(NestedState::Parent(pool))
    }

    async fn handle(
        &self,
        _: ractor::ActorRef<NestedMsg<W>>,
        msg: NestedMsg<W>,
        state: &mut NestedState<W>,
    ) -> Result<(), ractor::ActorProcessingErr> {
        let NestedMsg::Run(request, reply) = msg;
        let result = match state {
            NestedState::Leaf(work) => work.run(&request),
            NestedState::Parent(children) => {
                let pool_error = |e: PoolError| EvaluatorError::Config(e.to_string());
                run_on(children, &request, pool_error, |_, e| e).await
            }
        };
        let _ = reply.send(result);
        Ok(())
    }
}

/// Splits `request` over the pool's children, runs the parts in parallel
/// and joins the answers in child order. The caller says what a pool
/// failure and a child's error (with the child's index) become.
///
/// # Errors
/// The pool's failure, or the first child's error, as the caller maps them.
pub async fn run_on<W: Work, E>(
    pool: &ActorPool<NestedWorker<W>>,
    request: &W::Request,
    pool_error: impl FnOnce(PoolError) -> E,
    child_error: impl Fn(usize, EvaluatorError) -> E,
) -> Result<W::Answer, E> {
    let parts = W::split(request, pool.len().max(1));
    let answers = pool.call_all(|i, reply| NestedMsg::Run(parts[i].clone(), reply)).await.map_err(pool_error)?;
    let mut out = Vec::with_capacity(answers.len());
    for (i, answer) in answers.into_iter().enumerate() {
        out.push(answer.map_err(|e| child_error(i, e))?);
    }
    Ok(W::join(out))
}

/// `0..total` in `n` contiguous shares whose lengths differ by at most
/// one, the longer first.
pub fn shares(total: usize, n: usize) -> Vec<std::ops::Range<usize>> {
    let (base, extra) = (total / n.max(1), total % n.max(1));
    let mut at = 0;
    (0..n)
        .map(|i| {
            let len = base + usize::from(i < extra);
            at += len;
            at - len..at
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_are_contiguous_and_near_equal() {
        assert_eq!(shares(7, 3), vec![0..3, 3..5, 5..7]);
        assert_eq!(shares(2, 4), vec![0..1, 1..2, 2..2, 2..2]);
    }
}
